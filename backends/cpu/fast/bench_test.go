package fast

import (
	"math/rand/v2"
	"testing"
)

// benchLevels runs fn as a sub-benchmark per supported level.
func benchLevels(b *testing.B, flops, bytes float64, fn func()) {
	for _, l := range levels(b) {
		b.Run(l.String(), func(b *testing.B) {
			prev := SetLevel(l)
			defer SetLevel(prev)
			fn()
			b.ResetTimer()
			for b.Loop() {
				fn()
			}
			s := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(flops/s/1e9, "GFLOP/s")
			b.ReportMetric(bytes/s/1e9, "GB/s")
		})
	}
}

func benchFP8(b *testing.B, m, k, n int) {
	r := rand.New(rand.NewPCG(1, 1))
	a := randActs(r, m, k)
	w, s := randFP8(r, n, k)
	out := make([]float32, m*n)
	bytes := float64(len(w)+len(s)) + 4*float64(len(a)+len(out))
	benchLevels(b, 2*float64(m*k*n), bytes, func() { MatmulFP8(out, a, m, k, w, s, n) })
}

func benchFP4(b *testing.B, m, k, n int) {
	r := rand.New(rand.NewPCG(1, 1))
	a := randActs(r, m, k)
	w, s := randFP4(r, n, k)
	out := make([]float32, m*n)
	bytes := float64(len(w)+len(s)) + 4*float64(len(a)+len(out))
	benchLevels(b, 2*float64(m*k*n), bytes, func() { MatmulFP4(out, a, m, k, w, s, n) })
}

func benchF32(b *testing.B, m, k, n int) {
	r := rand.New(rand.NewPCG(1, 1))
	a := randF32(r, m*k, false)
	w := randF32(r, n*k, false)
	out := make([]float32, m*n)
	bytes := 4 * float64(len(w)+len(a)+len(out))
	benchLevels(b, 2*float64(m*k*n), bytes, func() { MatmulF32(out, a, w, m, k, n) })
}

// Decode: one token through a 5120→2304 projection (an expert's w1).
func BenchmarkFP8GEMV(b *testing.B) { benchFP8(b, 1, 5120, 2304) }
func BenchmarkFP4GEMV(b *testing.B) { benchFP4(b, 1, 5120, 2304) }
func BenchmarkF32GEMV(b *testing.B) { benchF32(b, 1, 5120, 2304) }

// Prefill: 1024 tokens.
func BenchmarkFP8GEMM(b *testing.B) { benchFP8(b, 1024, 2048, 2048) }
func BenchmarkFP4GEMM(b *testing.B) { benchFP4(b, 1024, 2048, 2048) }
func BenchmarkF32GEMM(b *testing.B) { benchF32(b, 1024, 2048, 2048) }

// A medium batch (64 tokens, the DEPENDENCIES.md f32 shape).
func BenchmarkFP8GEMM64(b *testing.B) { benchFP8(b, 64, 5120, 2304) }
func BenchmarkF32GEMM64(b *testing.B) { benchF32(b, 64, 5120, 2304) }

func BenchmarkFP4GEMVL2(b *testing.B) { benchFP4(b, 1, 2048, 256) }
func BenchmarkFP8GEMVL2(b *testing.B) { benchFP8(b, 1, 2048, 128) }

// BenchmarkBF16GEMVHead is one decode token through a mini head: 32,768
// bf16 rows of 2,048 (134 MB, from DRAM), f32 output.
func BenchmarkBF16GEMVHead(b *testing.B) {
	const K, N = 2048, 32768
	r := rand.New(rand.NewPCG(1, 1))
	w := make([]byte, 2*N*K)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	for i := 1; i < len(w); i += 2 {
		w[i] &= 0x3f // finite, moderate exponents
	}
	a := randActs(r, 1, K)
	out := make([]float32, N)
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		MatmulF32W16(out, a, w, 1, K, N)
	}
}
