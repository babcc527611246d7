package transform

import "strings"

func init() {
	add("replaceComments", replaceComments)
	add("removeCommentsChar", removeCommentsChar)
	add("removeComments", removeComments)
}

// replaceComments replaces each C comment "/* ... */" by one space. A
// comment left open runs to the end of the value and also becomes one
// space ("a/*" gives "a "). Nothing else is touched, "*/" outside a comment
// included. "changed" is set when the value opens a comment.
func replaceComments(input string) (string, bool, error) {
	open := strings.Index(input, "/*")
	if open < 0 {
		return input, false, nil
	}
	out := make([]byte, 0, len(input))
	for open >= 0 {
		out = append(out, input[:open]...)
		out = append(out, ' ')
		end := strings.Index(input[open+2:], "*/")
		if end < 0 {
			return builtString(out), true, nil
		}
		input = input[open+2+end+2:]
		open = strings.Index(input, "/*")
	}
	out = append(out, input...)
	return builtString(out), true, nil
}

// commentMarkLen returns the length of the comment marker that
// removeCommentsChar deletes at s[i:], or 0. The markers are "/*", "*/",
// "<!--", "-->", "--" and "#"; "-->" wins over "--".
func commentMarkLen(s string, i int) int {
	rest := s[i:]
	switch s[i] {
	case '/':
		if strings.HasPrefix(rest, "/*") {
			return 2
		}
	case '*':
		if strings.HasPrefix(rest, "*/") {
			return 2
		}
	case '<':
		if strings.HasPrefix(rest, "<!--") {
			return 4
		}
	case '-':
		if strings.HasPrefix(rest, "-->") {
			return 3
		}
		if strings.HasPrefix(rest, "--") {
			return 2
		}
	case '#':
		return 1
	}
	return 0
}

// removeCommentsChar deletes the comment markers "/*", "*/", "<!--",
// "-->", "--" and "#" wherever they appear, scanning left to right, but
// keeps what lies between them. "changed" says whether one was deleted.
func removeCommentsChar(input string) (string, bool, error) {
	i := 0
	for ; i < len(input); i++ {
		if commentMarkLen(input, i) > 0 {
			break
		}
	}
	if i == len(input) {
		return input, false, nil
	}
	out := make([]byte, i, len(input))
	copy(out, input[:i])
	for i < len(input) {
		if n := commentMarkLen(input, i); n > 0 {
			i += n
			continue
		}
		out = append(out, input[i])
		i++
	}
	return builtString(out), true, nil
}

// removeComments deletes comments the way ModSecurity's t:removeComments
// does:
//   - "/*" or "<!--" opens a comment, which "*/" or "-->" closes (either
//     closes either); the comment, markers included, is deleted;
//   - the byte right after a closing marker is always kept, even when it
//     opens another comment or is "#"; when the marker ends the value, a
//     NUL byte is kept in its place;
//   - "--" or "#" outside a comment cuts the value there (a line comment
//     running to the end);
//   - a comment still open at the end is replaced by one space.
//
// "changed" is set exactly when the output differs from the input.
func removeComments(input string) (string, bool, error) {
	n := len(input)
	i := 0
	for ; i < n; i++ {
		switch input[i] {
		case '#':
		case '/':
			if !strings.HasPrefix(input[i:], "/*") {
				continue
			}
		case '-':
			if !strings.HasPrefix(input[i:], "--") {
				continue
			}
		case '<':
			if !strings.HasPrefix(input[i:], "<!--") {
				continue
			}
		default:
			continue
		}
		break
	}
	if i == n {
		return input, false, nil
	}
	out := make([]byte, i, n)
	copy(out, input[:i])
	inComment := false
	for i < n {
		c := input[i]
		if !inComment {
			switch {
			case c == '/' && i+1 < n && input[i+1] == '*':
				inComment = true
				i += 2
			case c == '<' && strings.HasPrefix(input[i:], "<!--"):
				inComment = true
				i += 4
			case c == '-' && i+1 < n && input[i+1] == '-', c == '#':
				return builtString(out), true, nil
			default:
				out = append(out, c)
				i++
			}
			continue
		}
		closed := 0
		switch {
		case c == '*' && i+1 < n && input[i+1] == '/':
			closed = 2
		case c == '-' && strings.HasPrefix(input[i:], "-->"):
			closed = 3
		}
		if closed == 0 {
			i++
			continue
		}
		inComment = false
		i += closed
		if i < n {
			out = append(out, input[i])
		} else {
			out = append(out, 0)
		}
		i++
	}
	if inComment {
		out = append(out, ' ')
	}
	return builtString(out), true, nil
}
