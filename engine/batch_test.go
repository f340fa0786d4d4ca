package engine

import (
	"slices"
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// lone runs prompt alone in a fresh B=1 session and feeds the greedy
// tokens for steps decode steps: the logits of every call.
func lone(t testing.TB, md *Model, prompt []int64, steps int) [][]float32 {
	t.Helper()
	s, err := md.NewSession(Options{Batch: 1, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lg, err := s.Prefill([][]int64{prompt})
	if err != nil {
		t.Fatal(err)
	}
	out := [][]float32{slices.Clone(lg.Last()[0])}
	for range steps {
		next := Sampling{}.Sample(lg.Last(), nil)
		if lg, err = s.Decode(next); err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(lg.Last()[0]))
	}
	return out
}

func openTinyOn(t testing.TB, backend string) *Model {
	t.Helper()
	md, err := Open(dstest.BuildTiny(t), dstest.TinyDir(), backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(md.Close)
	return md
}

// TestBatchEqualsLoneSessions: 4 slots, prompts of different lengths
// prefilled at different times, greedy steps interleaved (a slot joining
// mid-way, one freed and reused, steps of slots not in row order): every
// slot's logits are bit-identical to a lone session's, on cpu-ref and cpu.
func TestBatchEqualsLoneSessions(t *testing.T) {
	prompts := [][]int64{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}, {10, 11, 12, 13, 14, 15, 16}, {17, 18}}
	const steps = 6
	for _, be := range []string{"cpu-ref", "cpu"} {
		t.Run(be, func(t *testing.T) {
			md := openTinyOn(t, be)
			want := make([][][]float32, len(prompts))
			for i, p := range prompts {
				want[i] = lone(t, md, p, steps)
			}
			b, err := md.NewBatch(BatchOptions{Slots: 4, MaxLen: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if !b.Ragged() {
				t.Fatal("host backends must run rows at different positions")
			}
			req := map[int]int{} // slot → prompt index
			got := map[int]int{} // slot → calls checked
			last := map[int][]float32{}
			check := func(slot int, lg []float32) {
				t.Helper()
				p := req[slot]
				if !slices.Equal(lg, want[p][got[slot]]) {
					t.Fatalf("slot %d (prompt %d) call %d: logits differ from a lone session", slot, p, got[slot])
				}
				got[slot]++
				last[slot] = slices.Clone(lg)
			}
			prefill := func(slot, p int) {
				t.Helper()
				req[slot], got[slot] = p, 0
				lg, err := b.Prefill(slot, prompts[p])
				if err != nil {
					t.Fatal(err)
				}
				check(slot, lg)
			}
			step := func(slots ...int) {
				t.Helper()
				var toks []int64
				for _, sl := range slots {
					toks = append(toks, Sampling{}.Sample([][]float32{last[sl]}, nil)[0])
				}
				lgs, err := b.Step(slots, toks)
				if err != nil {
					t.Fatal(err)
				}
				for i, sl := range slots {
					check(sl, lgs[i])
				}
			}
			prefill(0, 0)
			prefill(2, 1)
			step(0, 2)
			step(2)
			prefill(1, 2) // joins mid-way
			step(2, 0, 1)
			step(0, 1, 2)
			prefill(3, 3)
			step(0, 1, 2, 3)
			b.Free(2)
			prefill(2, 4) // reused
			step(3, 2, 1, 0)
			step(0, 1, 2, 3)
			step(1, 3)
			if b.Pos(2) != len(prompts[4])+2 || b.Pos(1) != 1+6 {
				t.Errorf("positions %d %d", b.Pos(2), b.Pos(1))
			}
		})
	}
}

// TestBatchUniformStep: a Step of every slot at one position is the plain
// decode call, equal to a session's Decode; bad steps are refused.
func TestBatchUniformStep(t *testing.T) {
	md := openTinyOn(t, "cpu")
	prompt := []int64{3, 1, 4}
	want := lone(t, md, prompt, 1)
	b, err := md.NewBatch(BatchOptions{Slots: 2, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for slot := range 2 {
		if _, err := b.Prefill(slot, prompt); err != nil {
			t.Fatal(err)
		}
	}
	tok := Sampling{}.Sample([][]float32{want[0]}, nil)[0]
	lgs, err := b.Step([]int{0, 1}, []int64{tok, tok})
	if err != nil {
		t.Fatal(err)
	}
	for i := range lgs {
		if !slices.Equal(lgs[i], want[1]) {
			t.Errorf("row %d differs from the session's decode", i)
		}
	}
	for _, bad := range []struct {
		slots []int
		toks  []int64
	}{{[]int{0}, []int64{int64(md.Vocab)}}, {[]int{0, 0}, []int64{1, 1}}, {[]int{5}, []int64{1}}, {nil, nil}} {
		if _, err := b.Step(bad.slots, bad.toks); err == nil {
			t.Errorf("step %v %v was accepted", bad.slots, bad.toks)
		}
	}
	b.Free(1)
	if _, err := b.Step([]int{1}, []int64{1}); err == nil {
		t.Error("a step of a freed slot was accepted")
	}
}
