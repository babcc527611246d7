package transform

import "strings"

func init() {
	add("normalizePath", normalizePath)
	add("normalisePath", normalizePath)
	add("normalizePathWin", normalizePathWin)
	add("normalisePathWin", normalizePathWin)
}

// normalizePath cleans a slash-separated path lexically, by the rules of
// path.Clean (which are those of filepath.Clean on the Unix and
// WebAssembly targets Coraza runs on): repeated slashes collapse, "."
// segments go, ".." removes the segment before it and is dropped at the
// root. Then:
//   - a path that cleans to "." (".", "./", "a/..") becomes empty;
//   - a path ending in '/' keeps one trailing slash, so "/" itself, which
//     cleans to "/", gives "//";
//   - the empty value stays empty and unchanged.
//
// "changed" is set exactly when the output differs from the input.
func normalizePath(input string) (string, bool, error) {
	if input == "" || pathNormal(input) {
		return input, false, nil
	}
	buf := make([]byte, len(input), len(input)+1)
	copy(buf, input)
	return builtString(normalizeInPlace(buf)), true, nil
}

// pathNormal reports whether normalizePath leaves the non-empty p as it is.
func pathNormal(p string) bool {
	if p[len(p)-1] != '/' {
		return p != "." && pathClean(p)
	}
	// Cleaning drops the trailing slash that normalizePath then restores.
	body := p[:len(p)-1]
	return body != "" && body != "." && pathClean(body)
}

// pathClean reports whether cleaning the non-empty p gives p itself: no
// empty segment (a doubled or a trailing slash, "/" itself aside), no "."
// segment ("." itself aside), and ".." only in a run at the start of a
// relative path.
func pathClean(p string) bool {
	if p == "/" || p == "." {
		return true
	}
	rooted := p[0] == '/'
	if rooted {
		p = p[1:]
	}
	climbing := !rooted // still in the leading ".." segments
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".":
			return false
		case "..":
			if !climbing {
				return false
			}
		default:
			climbing = false
		}
	}
	return true
}

// normalizeInPlace applies normalizePath to the path in b (not empty,
// with room for one more byte) and returns the result, which shares b's
// storage.
func normalizeInPlace(b []byte) []byte {
	trailing := b[len(b)-1] == '/'
	b = cleanInPlace(b)
	if len(b) == 1 && b[0] == '.' {
		return b[:0]
	}
	if trailing {
		b = append(b, '/')
	}
	return b
}

// cleanInPlace cleans the non-empty slash path in b lexically (see
// normalizePath) and returns the cleaned path, a prefix of b. Every byte
// it writes stands for a byte it has already read (a segment byte for
// itself, a separator for one of the slashes before that segment), so the
// write position never passes the read position.
func cleanInPlace(b []byte) []byte {
	n := len(b)
	rooted := b[0] == '/'
	r, w, floor := 0, 0, 0 // floor: what ".." can no longer take back
	if rooted {
		r, w, floor = 1, 1, 1
	}
	for r < n {
		switch {
		case b[r] == '/':
			r++
		case b[r] == '.' && (r+1 == n || b[r+1] == '/'):
			r++
		case b[r] == '.' && r+1 < n && b[r+1] == '.' && (r+2 == n || b[r+2] == '/'):
			r += 2
			switch {
			case w > floor:
				// Take back the last segment written, and its separator.
				w--
				for w > floor && b[w] != '/' {
					w--
				}
			case !rooted:
				// Nothing left to take back: the ".." stays.
				if w > 0 {
					b[w] = '/'
					w++
				}
				b[w], b[w+1] = '.', '.'
				w += 2
				floor = w
			}
			// At the root, ".." is dropped.
		default:
			if w > floor || (w > 0 && !rooted) {
				b[w] = '/'
				w++
			}
			for ; r < n && b[r] != '/'; r++ {
				b[w] = b[r]
				w++
			}
		}
	}
	if w == 0 {
		return append(b[:0], '.')
	}
	return b[:w]
}

// normalizePathWin cleans a Windows path: backslashes become slashes, the
// result is cleaned as by normalizePath, and then what Windows ignores
// when it opens a file is dropped too:
//   - an alternate data stream suffix: the last segment is cut at its
//     first ':' ("a/f.txt::$DATA" gives "a/f.txt"), a leading drive letter
//     ("C:") aside, a trailing slash kept;
//   - trailing dots and spaces of each segment ("f.txt. " gives "f.txt"),
//     a segment of dots only (".", "..", or an empty one) aside; a segment
//     that this leaves empty is dropped with its slash.
//
// "changed" is set exactly when the output differs from the input.
func normalizePathWin(input string) (string, bool, error) {
	if input == "" {
		return input, false, nil
	}
	if strings.IndexByte(input, '\\') < 0 && pathNormal(input) &&
		dataStreamAt(input) < 0 && !trimmableSegments(input) {
		return input, false, nil
	}
	buf := make([]byte, len(input), len(input)+1)
	for i := 0; i < len(input); i++ {
		c := input[i]
		if c == '\\' {
			c = '/'
		}
		buf[i] = c
	}
	buf = normalizeInPlace(buf)
	if at := dataStreamAt(builtString(buf)); at >= 0 {
		if buf[len(buf)-1] == '/' {
			buf[at] = '/'
			buf = buf[:at+1]
		} else {
			buf = buf[:at]
		}
	}
	if trimmableSegments(builtString(buf)) {
		buf = trimSegmentsInPlace(buf)
	}
	if out := builtString(buf); out != input {
		return out, true, nil
	}
	return input, false, nil
}

// dataStreamAt returns where normalizePathWin cuts the cleaned path p for
// an alternate data stream: the first ':' of the last segment, looking
// past a drive letter at the start and a slash at the end; -1 if none.
func dataStreamAt(p string) int {
	start := 0
	if len(p) >= 2 && p[1] == ':' && ('a' <= p[0] && p[0] <= 'z' || 'A' <= p[0] && p[0] <= 'Z') {
		start = 2
	}
	end := len(p)
	if end > start && p[end-1] == '/' {
		end--
	}
	last := start + strings.LastIndexByte(p[start:end], '/') + 1
	colon := strings.IndexByte(p[last:end], ':')
	if colon < 0 {
		return -1
	}
	return last + colon
}

// onlyDots reports whether s is made of '.' only (the empty string is).
func onlyDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			return false
		}
	}
	return true
}

// trimmableSegment reports whether normalizePathWin trims the segment:
// it ends in '.' or ' ' and is not made of dots only.
func trimmableSegment(seg string) bool {
	if onlyDots(seg) {
		return false
	}
	last := seg[len(seg)-1]
	return last == '.' || last == ' '
}

// trimmableSegments reports whether a segment of p is trimmable.
func trimmableSegments(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if trimmableSegment(seg) {
			return true
		}
	}
	return false
}

// trimSegmentsInPlace trims the trimmable segments of the path in b,
// dropping those left empty with their slash, and returns the result, a
// prefix of b.
func trimSegmentsInPlace(b []byte) []byte {
	w := 0
	first := true
	for r := 0; r <= len(b); {
		end := r
		for end < len(b) && b[end] != '/' {
			end++
		}
		seg := builtString(b[r:end])
		if trimmableSegment(seg) {
			seg = strings.TrimRight(seg, ". ")
		}
		if seg != "" || onlyDots(builtString(b[r:end])) {
			if !first {
				b[w] = '/'
				w++
			}
			w += copy(b[w:], seg)
			first = false
		}
		r = end + 1
	}
	return b[:w]
}
