package workpool

import "testing"

var sink float64

// work is about 20 µs of arithmetic on one core.
func work() float64 {
	s := 1.0
	for i := 0; i < 20000; i++ {
		s = s*1.0000001 + 1e-9
	}
	return s
}

// BenchmarkRunForkJoin is one Run of 2 tasks of ~20 µs each, back to back
// (a decode step runs a few hundred such sections): with 2 threads, ns/op
// minus one task's time is the fork-join overhead.
func BenchmarkRunForkJoin(b *testing.B) {
	var out [2]float64
	for b.Loop() {
		Run(2, func(i int) { out[i] = work() })
	}
	sink = out[0] + out[1]
}
