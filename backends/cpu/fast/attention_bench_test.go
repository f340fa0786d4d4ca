package fast

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// BenchmarkSparseAttnDecode is one decode query of a mini layer: 16 heads
// of 512, 640 indexed rows (the 128-row window and 512 chosen ones) of a
// 1,024-row KV buffer. H=8 in the environment times the 8 heads one
// worker of a 2-thread decode gets.
func BenchmarkSparseAttnDecode(b *testing.B) {
	h, d, n, t := 16, 512, 1024, 640
	if v := os.Getenv("H"); v != "" {
		h, _ = strconv.Atoi(v)
	}
	r := rand.New(rand.NewPCG(1, 1))
	q := randF32(r, h*d, true)
	kv := randF32(r, n*d, true)
	sink := randF32(r, h, false)
	idx := make([]int32, t)
	for i := range idx {
		idx[i] = int32(r.IntN(n))
	}
	out := make([]float32, h*d)
	b.ReportMetric(0, "ns/op")
	for b.Loop() {
		SparseAttn(out, q, 1, 1, h, d, kv, n, sink, idx, t, 0.04)
	}
}

// BenchmarkSparseAttnPrefill is 8 query positions of a mini layer's
// prefill at each level (16 heads of 512, 640 indexed rows each of a
// 1,024-row KV buffer).
func BenchmarkSparseAttnPrefill(b *testing.B) {
	h, d, n, t, m := 16, 512, 1024, 640, 8
	r := rand.New(rand.NewPCG(1, 1))
	q := randF32(r, m*h*d, true)
	kv := randF32(r, n*d, true)
	sink := randF32(r, h, false)
	idx := make([]int32, m*t)
	for i := range idx {
		idx[i] = int32(r.IntN(n))
	}
	out := make([]float32, m*h*d)
	for _, l := range levels(b) {
		b.Run(l.String(), func(b *testing.B) {
			withLevel(l, func() {
				for b.Loop() {
					SparseAttn(out, q, 1, m, h, d, kv, n, sink, idx, t, 0.04)
				}
			})
		})
	}
}
