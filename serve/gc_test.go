package serve

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestTuneGC: the percentage lets a small live heap grow by about
// GCHeadroom (capped at 800 %), is Go's 100 for a live heap past the
// headroom, and is in force after the call.
func TestTuneGC(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: TuneGC leaves it")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	small := TuneGC()
	if small <= 100 || small > 800 {
		t.Errorf("a test binary's live heap: %d %%, want above 100, at most 800", small)
	}
	if got := debug.SetGCPercent(small); got != small {
		t.Errorf("TuneGC returned %d %%, the collector has %d %%", small, got)
	}
	big := make([]byte, GCHeadroom+64<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if pct := TuneGC(); pct != 100 {
		t.Errorf("a live heap past the headroom: %d %%, want 100", pct)
	}
	runtime.KeepAlive(big)
}

// TestTuneGCLeavesGOGC: with GOGC in the environment TuneGC changes
// nothing and returns the percentage in force.
func TestTuneGCLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "150")
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	if pct := TuneGC(); pct != 150 {
		t.Errorf("TuneGC returned %d %%, GOGC is 150", pct)
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Errorf("TuneGC changed the percentage to %d", got)
	}
}
