package preselect

import (
	"slices"
	"testing"
)

// removeRecorder records what a screen removes.
type removeRecorder struct {
	ids    []int
	ranges [][2]int
}

func (r *removeRecorder) RemoveRuleByID(id int) { r.ids = append(r.ids, id) }
func (r *removeRecorder) RemoveRuleByIDRange(start, end int) {
	r.ranges = append(r.ranges, [2]int{start, end})
}
func (r *removeRecorder) GetRuleRemoveByIDRanges() [][2]int { return r.ranges }

// removes reports whether the removeRecorder take out id.
func (r *removeRecorder) removes(id int) bool {
	if slices.Contains(r.ids, id) {
		return true
	}
	for _, rg := range r.ranges {
		if id >= rg[0] && id <= rg[1] {
			return true
		}
	}
	return false
}

func TestRemoveDropped(t *testing.T) {
	// A phase plan of 30 rules with IDs 100, 110, ..., 390 in ID order,
	// and among them rules of other kinds.
	pp := &phasePlan{}
	for i := 0; i < 30; i++ {
		pp.rules = append(pp.rules, &srule{id: 100 + 10*i, idx: i})
	}
	for _, r := range pp.rules {
		pp.ids = append(pp.ids, idSlot{id: r.id, idx: int32(r.idx)})
	}
	keep := map[int]bool{205: true} // a rule of a later phase
	// 155 is a rule of an earlier phase: a range may cover it.
	pp.ids = append(pp.ids, idSlot{id: 205, idx: slotKeep}, idSlot{id: 155, idx: slotDone})
	slices.SortFunc(pp.ids, func(a, b idSlot) int { return a.id - b.id })
	pp.slotOf = make([]int32, len(pp.rules))
	for k, s := range pp.ids {
		if s.idx >= 0 {
			pp.slotOf[s.idx] = int32(k)
		}
	}

	for _, c := range []struct {
		name      string
		drop      []int // rule indexes dropped now
		before    []int // dropped by an earlier screen
		matched   []int // kept
		wantRange int   // how many ranges
	}{
		{"few drops, one by one", []int{0, 1, 2}, nil, nil, 0},
		// 100..190 with 155 (done) in between: one range; 205 (keep)
		// ends it before 200.
		{"a run up to the later phase's rule", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, nil, nil, 1},
		// 205 lies among the dropped rules: the run stops there, and
		// 210..250 are too few for a range.
		{"the later phase's rule splits the run", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, nil, nil, 1},
		{"a matched rule splits the run", []int{11, 12, 13, 14, 15, 16, 17, 18, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29}, nil, []int{19}, 2},
		{"too few dropped now", []int{11, 12, 13, 14, 15, 20, 21, 22}, []int{16, 17, 18}, []int{19}, 0},
		{"rules dropped before join the run, enough now", []int{11, 12, 13, 14, 15, 16, 17, 18}, []int{20}, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &txState{}
			st.rules = make([]uint8, len(pp.rules))
			st.now = make([]uint32, len(pp.rules))
			for _, i := range c.before {
				st.rules[i] = dropped
			}
			for _, i := range c.matched {
				st.rules[i] = matched
			}
			for _, i := range c.drop {
				st.decide(pp.rules[i], false)
			}
			var got removeRecorder
			st.removeDropped(pp, &got)
			if len(got.ranges) != c.wantRange {
				t.Errorf("ranges %v, want %d", got.ranges, c.wantRange)
			}
			for i, r := range pp.rules {
				now := slices.Contains(c.drop, i)
				if now && !got.removes(r.id) {
					t.Errorf("rule %d dropped now is not removed (%+v)", r.id, got)
				}
				if !now && !slices.Contains(c.before, i) && got.removes(r.id) {
					t.Errorf("rule %d (not dropped) removed (%+v)", r.id, got)
				}
			}
			for id := range keep {
				if got.removes(id) {
					t.Errorf("rule %d of a later phase removed (%+v)", id, got)
				}
			}
			if len(got.ranges) == 0 && len(got.ids) != len(c.drop) {
				t.Errorf("removed one by one %v, want the %d dropped", got.ids, len(c.drop))
			}
			for _, id := range got.ids {
				for _, rg := range got.ranges {
					if id >= rg[0] && id <= rg[1] {
						t.Errorf("rule %d removed twice (%+v)", id, got)
					}
				}
			}
		})
	}
}
