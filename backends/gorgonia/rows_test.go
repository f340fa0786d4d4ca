package gorgonia

import (
	"slices"
	"testing"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// TestBatchRowsGorgonia: the gorgonia device runs rows at different
// positions (it is a HostDevice): three slots prefilled at different times
// and stepped together give each slot the logits of a lone session.
func TestBatchRowsGorgonia(t *testing.T) {
	md, err := engine.Open(dstest.BuildTiny(t), dstest.TinyDir(), "gorgonia")
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	prompts := [][]int64{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}}
	want := make([][][]float32, len(prompts)) // prefill and one decode step
	for i, p := range prompts {
		s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: 16})
		if err != nil {
			t.Fatal(err)
		}
		lg, err := s.Prefill([][]int64{p})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = append(want[i], slices.Clone(lg.Last()[0]))
		if lg, err = s.Decode([]int64{int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
		want[i] = append(want[i], slices.Clone(lg.Last()[0]))
		s.Close()
	}
	b, err := md.NewBatch(engine.BatchOptions{Slots: 3, MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.Ragged() {
		t.Fatal("gorgonia does not run ragged rows")
	}
	for i, p := range prompts {
		lg, err := b.Prefill(i, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(lg, want[i][0]) {
			t.Errorf("slot %d: prefill logits differ from a lone session", i)
		}
	}
	lgs, err := b.Step([]int{2, 0, 1}, []int64{3, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range []int{2, 0, 1} {
		if !slices.Equal(lgs[k], want[i][1]) {
			d := 0.0
			for j := range lgs[k] {
				d = max(d, float64(abs32(lgs[k][j]-want[i][1][j])))
			}
			t.Errorf("slot %d: step logits differ from a lone session (max abs %g)", i, d)
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
