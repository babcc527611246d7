package preselect

import "bytes"

// JumpPlan is where the jumps go in a rule set's texts: by file (the name
// Coraza reads it by; "" for the directives themselves) and line. It also
// holds the files the planner read, for the compile to read them again
// without a second copy.
type JumpPlan struct {
	lines map[string]map[int]string
	ids   []int
	files map[string][]byte
	// screened are the IDs of the screened jumps among ids
	// (screenedjumps.go).
	screened []int
	// blank are the lines of each file that the rules left out of the
	// compile take, leftOut their IDs and gates the gates they were left
	// out behind (leftout.go).
	blank   map[string]map[int]bool
	leftOut []int
	gates   []int
}

// IDs returns the rule IDs of the planned jumps.
func (p *JumpPlan) IDs() []int {
	if p == nil {
		return nil
	}
	return p.ids
}

// Directives returns the directives with the jumps planned in them.
func (p *JumpPlan) Directives(text string) string { return p.apply("", text) }

// ReadFile returns, the first time it is asked for name, the file the
// planner read by that name with the jumps planned in it; ok is false
// after that, or for a file the planner did not read once: the caller
// then reads the file as it is.
func (p *JumpPlan) ReadFile(name string) (data []byte, ok bool) {
	if p == nil {
		return nil, false
	}
	data, ok = p.files[name]
	delete(p.files, name)
	return data, ok
}

func (p *JumpPlan) apply(name, text string) string {
	if p == nil || p.lines[name] == nil && p.blank[name] == nil {
		return text
	}
	return string(p.splice(name, []byte(text)))
}

// splice returns data with each planned line replaced by its jump, and
// the lines of the rules left out blank; a \r at the end of a replaced
// line stays, so that CRLF line ends stay.
func (p *JumpPlan) splice(name string, data []byte) []byte {
	jumps, blank := p.lines[name], p.blank[name]
	out := make([]byte, 0, len(data)+len(jumps)*100)
	for i := 0; len(data) != 0; i++ {
		line, rest, found := bytes.Cut(data, []byte("\n"))
		data = rest
		if blank[i] {
			if bytes.HasSuffix(line, []byte("\r")) {
				out = append(out, '\r')
			}
		} else if j, ok := jumps[i]; ok {
			out = append(out, j...)
			if bytes.HasSuffix(line, []byte("\r")) {
				out = append(out, '\r')
			}
		} else {
			out = append(out, line...)
		}
		if found {
			out = append(out, '\n')
		}
	}
	return out
}

// add plans the jump rule text (with the next jump ID) on the free line
// it, and returns its ID.
func (p *JumpPlan) add(it jitem, text string) int {
	id := jumpBase + len(p.ids)
	p.ids = append(p.ids, id)
	if p.lines[it.file] == nil {
		p.lines[it.file] = map[int]string{}
	}
	p.lines[it.file][it.line] = text
	return id
}

// rewrite makes, of each file the rule set read once, the text the
// compile reads: with the planned lines replaced when it has some, else
// as read.
func (p *JumpPlan) rewrite(s *RuleSet) {
	p.files = map[string][]byte{}
	for f, data := range s.data {
		if s.reads[f] == 1 {
			if p.lines[f] != nil || p.blank[f] != nil {
				data = p.splice(f, data)
			}
			p.files[f] = data
		}
	}
}
