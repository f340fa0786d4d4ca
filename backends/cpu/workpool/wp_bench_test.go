package workpool

import (
	"testing"
	"time"
)

// BenchmarkRunForkJoin is the cost of one Run of GOMAXPROCS tasks of about
// 20 µs each back to back (a decode step runs a few hundred such sections):
// with 2 threads, ns/op − 20 µs is the fork-join overhead.
func BenchmarkRunForkJoin(b *testing.B) {
	spin := func(d time.Duration) {
		for t0 := time.Now(); time.Since(t0) < d; {
		}
	}
	for b.Loop() {
		Run(2, func(int) { spin(20 * time.Microsecond) })
	}
}
