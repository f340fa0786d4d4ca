package engine

import (
	"math"
	"testing"
)

// A prefill on the last position gives the bits of the last row of the
// full prefill's logits (the fast cpu backend computes the one-row head of
// a prompt as its many-row head: backends.Env.Chunk), leaves the caches as
// the full one does (the next decode step's logits agree bit for bit), and
// FullLogits still returns every position. Planned (buffer slots) and
// unplanned graphs, on both CPU backends.
func TestPrefillLastPositionMatchesFull(t *testing.T) {
	prompt := [][]int64{{5, 17, 3, 99, 42, 7, 250, 11, 64}}
	for _, backend := range []string{"cpu-ref", "cpu"} {
		for _, planned := range []bool{false, true} {
			md := openTinyPlan(t, backend, planned)
			run := func(full bool) (*Logits, *Logits) {
				s, err := md.NewSession(Options{Batch: 1, MaxLen: 16, FullLogits: full, MaxMemory: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				pre, err := s.Prefill(prompt)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := s.Decode([]int64{8})
				if err != nil {
					t.Fatal(err)
				}
				return pre, dec
			}
			lastPre, lastDec := run(false)
			fullPre, fullDec := run(true)
			if lastPre.S != 1 || fullPre.S != len(prompt[0]) {
				t.Fatalf("%s planned=%v: prefill logits of %d and %d positions, want 1 and %d", backend, planned, lastPre.S, fullPre.S, len(prompt[0]))
			}
			same := func(what string, a, b []float32) {
				if len(a) != len(b) {
					t.Fatalf("%s planned=%v %s: %d and %d logits", backend, planned, what, len(a), len(b))
				}
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
						t.Fatalf("%s planned=%v %s: logit %d is %v on the last position, %v in the full prefill", backend, planned, what, i, a[i], b[i])
					}
				}
			}
			same("prefill", lastPre.Last()[0], fullPre.Last()[0])
			same("decode after it", lastDec.Last()[0], fullDec.Last()[0])
		}
	}
}

// The copy on the last position leaves the plan's graph as it was.
func TestLastLogitsLeavesThePlanGraph(t *testing.T) {
	md := openTinyPlan(t, "cpu-ref", true)
	if got := md.pgFull.Outputs[0].Node.Type.Shape[1].String(); got != "S" {
		t.Errorf("the plan's prefill logits have %s positions, want S", got)
	}
	if got := md.pg.Outputs[0].Node.Type.Shape[1].String(); got != "1" {
		t.Errorf("the session's prefill logits have %s positions, want 1", got)
	}
	if n := md.pgFull.OpCounts()["last"]; n != 0 {
		t.Errorf("the plan's prefill graph holds %d last nodes", n)
	}
}
