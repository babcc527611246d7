package transform

import "strings"

// Triggers returns, for the named transformation (any case), bytes
// without which it leaves a value as it is: given a value that holds none
// of them, the function returns the value itself and "changed" false. A
// caller that knows which bytes a value holds (the rule preselection
// keeps one set per value) then needs no call, where each call reads the
// whole value. ok is false for a transformation that may change any value
// (base64Decode, length, ...) or that is not this package's.
//
// Each set follows from where the function's first scan stops (the
// comments of the functions): a byte the scan stops at is in the set, or
// a multi-byte marker has one of its bytes in it. TestTriggers checks
// every set on the regression corpus and on random values.
func Triggers(name string) (bytes *[256]bool, ok bool) {
	t, ok := triggers[strings.ToLower(name)]
	return t, ok
}

var triggers = func() map[string]*[256]bool {
	const (
		space    = " \t\n\v\f\r"
		upper    = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		nonASCII = "\x80" // stands for every byte from 0x80 on
	)
	set := func(bytes ...string) *[256]bool {
		var s [256]bool
		for _, b := range bytes {
			for i := 0; i < len(b); i++ {
				s[b[i]] = true
				if b[i] == 0x80 {
					for c := 0x80; c < 256; c++ {
						s[c] = true
					}
				}
			}
		}
		return &s
	}
	return map[string]*[256]bool{
		// Stops at A-Z and at any non-ASCII rune (invalid, or one
		// that lower-cases to another).
		"lowercase":   set(upper, nonASCII),
		"removenulls": set("\x00"),
		// ASCII white space, and the Unicode spaces and invalid bytes.
		"removewhitespace":   set(space, nonASCII),
		"compresswhitespace": set(space, nonASCII),
		"trim":               set(space),
		"trimleft":           set(space),
		"trimright":          set(space),
		"urldecode":          set("%+"),
		"urldecodeuni":       set("%+"),
		// A reference starts with '&'.
		"htmlentitydecode": set("&"),
		"jsdecode":         set(`\`),
		"cssdecode":        set(`\`),
		"escapeseqdecode":  set(`\`),
		// "/*" holds '*'; "*/", "<!--", "-->", "--" and "#" hold '*',
		// '-' or '#'.
		"replacecomments":    set("*"),
		"removecommentschar": set("*-#"),
		"removecomments":     set("*-#"),
		// A path changes only with a slash or a '.' segment.
		"normalizepath": set("/."),
		"normalisepath": set("/."),
		// Also a backslash, a data stream's ':' and a segment that
		// ends in a space.
		"normalizepathwin": set(`\/.: `),
		"normalisepathwin": set(`\/.: `),
		"utf8tounicode":    set(nonASCII),
		// Quoting bytes, separators, and A-Z (ASCII only).
		"cmdline": set(`\"'^ `+"\t\n\r,;", upper),
	}
}()
