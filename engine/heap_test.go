package engine

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/ds4go/ds4/backends"
)

// TestPromptBoundsHeap: a long prompt's chunk calls set the soft memory
// limit to at least what their arenas will hold plus the headroom (so the
// collector does not run before the arenas are in place), not to the
// default (no limit), and a later call does not lower it.
func TestPromptBoundsHeap(t *testing.T) {
	if userMemLimit {
		t.Skip("GOMEMLIMIT is set: the engine leaves the limit alone")
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	md := openTinyPlan(t, "cpu", true)
	s, err := md.NewSession(Options{Batch: 1, MaxLen: 64, PrefillChunk: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill([][]int64{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}); err != nil {
		t.Fatal(err)
	}
	var planned int64
	for _, a := range s.arenas[md.chunk] {
		if h, ok := a.(*backends.HostArena); ok {
			planned = max(planned, h.PlannedBytes())
		}
	}
	limit := debug.SetMemoryLimit(-1)
	if planned <= 0 || limit == math.MaxInt64 || limit < planned+heapHeadroom {
		t.Fatalf("memory limit %d after a prompt whose arena plans %d bytes (headroom %d)", limit, planned, heapHeadroom)
	}
	if _, err := s.Decode([]int64{3}); err != nil {
		t.Fatal(err)
	}
	if after := debug.SetMemoryLimit(-1); after < limit {
		t.Errorf("the limit fell from %d to %d", limit, after)
	}
}
