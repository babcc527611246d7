package transform

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tokenMixes returns n strings of 0 to 12 tokens drawn from tokens, always
// the same for the same seed. Fuzzing explores at random; these mixes
// pack the markers each transformation reacts to, so that every pairing of
// them is met quickly.
func tokenMixes(seed uint64, n int, tokens ...string) []string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]string, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		for k := rng.IntN(13); k > 0; k-- {
			b.WriteString(tokens[rng.IntN(len(tokens))])
		}
		out[i] = b.String()
	}
	return out
}

// TestTokenMixesEqualBuiltin compares each transformation of this file's
// group with the built-in on token mixes.
func TestTokenMixesEqualBuiltin(t *testing.T) {
	commentTokens := []string{"/", "*", "<", "!", "-", ">", "#", "a", " ", "\x00", "/*", "*/", "<!--", "-->", "--"}
	pathTokens := []string{"/", `\`, ".", "..", "a", "b.", ":", "C:", " ", ". ", "::$DATA", "//", "x:y", "c"}
	spaceTokens := append([]string{"a", "é", "\xff", "\xc2", "\xe0", "\ufffd", "A", "  "}, spaceRunes...)
	groups := map[string][]string{
		"cmdLine":            {`\`, `"`, `'`, "^", " ", ",", ";", "\t", "\r", "\n", "/", "(", "A", "z", "é", "\v"},
		"replaceComments":    commentTokens,
		"removeCommentsChar": commentTokens,
		"removeComments":     commentTokens,
		"normalizePath":      pathTokens,
		"normalizePathWin":   pathTokens,
		"base64Decode":       {"A", "Q", "/", "+", "=", " ", "\r", "\n", "-", "_", ".", "0", "\xff", "z", "\t"},
		"compressWhitespace": spaceTokens,
		"removeWhitespace":   spaceTokens,
		"trim":               spaceTokens,
		"lowercase":          append([]string{"A", "a", "\xff", "\xc3", "İ", "\u212a", "Ⱥ", "ẞ", "Σ", "\ufffd", "É", "ǅ", "@"}, spaceRunes[:3]...),
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		t.Run(name, func(t *testing.T) {
			mixes := tokenMixes(uint64(len(name)), 4000, groups[name]...)
			equalOnCorpus(t, name, mixes...)
		})
	}
}
