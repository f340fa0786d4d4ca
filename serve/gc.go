package serve

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// GCHeadroom is how far TuneGC lets the heap grow past its live bytes
// before a collection.
const GCHeadroom = 256 << 20

// TuneGC sets the collector's target for a server process and returns the
// percentage in force (cmd/serve calls it once the engine is built). Go's
// default (GOGC 100) collects each time the heap doubles: with a small live
// heap (the tiny model's ~35 MiB) every few decode steps, and each
// collection takes a core from the side-by-side lanes of a batched step
// while the other lane waits at its end (16 streams on the tiny model,
// cpu, Zen 5: rounds 259 → 239, 346 → 292, 270 → 236 ms at the 733 % this
// sets there, interleaved with GOGC 100). TuneGC sets the
// percentage that lets the heap grow by about GCHeadroom past its live
// bytes, between 100 and 800, unless the environment sets GOGC.
func TuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		return int(readMetric("/gc/gogc:percent"))
	}
	runtime.GC()
	live := readMetric("/gc/heap/live:bytes")
	pct := 800
	if live > 0 {
		pct = int(min(800, max(100, 100*GCHeadroom/live)))
	}
	debug.SetGCPercent(pct)
	return pct
}

// readMetric is a uint64 runtime metric (0 when the runtime lacks it).
func readMetric(name string) int64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
