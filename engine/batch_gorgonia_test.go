package engine

import (
	"slices"
	"testing"

	_ "github.com/ds4go/ds4/backends/gorgonia"
)

// TestBatchGorgoniaEqualsLoneSessions: on gorgonia (which registers no
// row positions and no portable ops, and falls back to cpu, which does)
// ragged steps give every slot the logits of its lone session bit for bit:
// start_pos is every row's for the cpu fallback's ops and each row's own
// for gorgonia's.
func TestBatchGorgoniaEqualsLoneSessions(t *testing.T) {
	const slots, steps = 6, 3
	md := openTinyPlan(t, "gorgonia", true)
	b, err := md.NewBatch(BatchOptions{Slots: slots, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.Ragged() {
		t.Fatal("gorgonia's batch does not run rows at different positions in one call")
	}
	want := make([][][]float32, slots)
	all := make([]int, slots)
	last := make([][]float32, slots)
	for s := range slots {
		p := make([]int64, 1+s)
		for i := range p {
			p[i] = int64(1 + (3*s+i)%50)
		}
		want[s] = lone(t, md, p, steps)
		all[s] = s
		if last[s], err = b.Prefill(s, p); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(last[s], want[s][0]) {
			t.Fatalf("slot %d: the prefill's logits differ from a lone session's", s)
		}
	}
	for st := 1; st <= steps; st++ {
		toks := make([]int64, slots)
		for s := range slots {
			toks[s] = Sampling{}.Sample([][]float32{last[s]}, nil)[0]
		}
		lgs, err := b.Step(all, toks)
		if err != nil {
			t.Fatal(err)
		}
		for s := range slots {
			if !slices.Equal(lgs[s], want[s][st]) {
				t.Fatalf("step %d slot %d: logits differ from a lone session", st, s)
			}
			last[s] = lgs[s]
		}
	}
}
