package fast

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkExpertDecode is one decode token through the w1 of 6 routed
// experts of 64 (1536×2048 fp4, 100 MB in all: the experts come from DRAM),
// a different choice of experts each call.
func BenchmarkExpertDecode(b *testing.B) {
	const E, K, O, k = 64, 2048, 1536, 6
	r := rand.New(rand.NewPCG(1, 1))
	ws := make([]Expert, E)
	for e := range ws {
		q, s := randFP4(r, O, K)
		ws[e] = Expert{FP4: true, Codes: q, Scales: s}
	}
	x := randActs(r, 1, K)
	out := make([]float32, k*O)
	idx := make([]int64, k)
	get := func(e int) (Expert, bool) { return ws[e], true }
	call := 0
	b.SetBytes(int64(k * (O*K/2 + O*K/32)))
	for b.Loop() {
		for j := range idx {
			idx[j] = int64((call*k + j) * 7 % E)
		}
		call++
		if err := ExpertMatmul(out, x, 1, k, K, O, false, idx, get); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFP8GEMVDRAM is one decode token through 1024→8192 fp8
// projections (wq_b of the mini model), a different one of 16 (128 MiB)
// each call, so the weights come from DRAM.
func BenchmarkFP8GEMVDRAM(b *testing.B) { benchGEMVDRAM(b, kindFP8, 16, 1024, 8192) }

// BenchmarkFP4GEMVDRAM is BenchmarkFP8GEMVDRAM for 2048→8192 fp4 matrices,
// a different one of 32 (256 MiB) each call.
func BenchmarkFP4GEMVDRAM(b *testing.B) { benchGEMVDRAM(b, kindFP4, 32, 2048, 8192) }

// benchGEMVDRAM times one activation row through M distinct K→N weight
// matrices of kind (fp8 or fp4) in turn; GB/s counts the codes read.
func benchGEMVDRAM(b *testing.B, kind wkind, M, K, N int) {
	r := rand.New(rand.NewPCG(1, 1))
	qs, ss := make([][]byte, M), make([][]byte, M)
	for i := range qs {
		if kind == kindFP4 {
			qs[i], ss[i] = randFP4(r, N, K)
		} else {
			qs[i], ss[i] = randFP8(r, N, K)
		}
	}
	a := randActs(r, 1, K)
	out := make([]float32, N)
	b.SetBytes(int64(len(qs[0])))
	i := 0
	for b.Loop() {
		if kind == kindFP4 {
			MatmulFP4(out, a, 1, K, qs[i%M], ss[i%M], N)
		} else {
			MatmulFP8(out, a, 1, K, qs[i%M], ss[i%M], N)
		}
		i++
	}
}

// BenchmarkExpertPrefill is the w1 of a mini MoE layer for a 1,024-token
// prompt: 6 of 64 fp4 experts per token (about 96 rows per expert).
func BenchmarkExpertPrefill(b *testing.B) {
	const E, K, O, k, N = 64, 2048, 1536, 6, 1024
	r := rand.New(rand.NewPCG(1, 1))
	ws := make([]Expert, E)
	for e := range ws {
		q, s := randFP4(r, O, K)
		ws[e] = Expert{FP4: true, Codes: q, Scales: s}
	}
	x := randActs(r, N, K)
	out := make([]float32, N*k*O)
	idx := make([]int64, N*k)
	for i := range idx {
		idx[i] = int64(r.IntN(E))
	}
	get := func(e int) (Expert, bool) { return ws[e], true }
	b.ReportMetric(0, "ns/op")
	for b.Loop() {
		if err := ExpertMatmul(out, x, N, k, K, O, false, idx, get); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(N*k*K*O)/b.Elapsed().Seconds()*float64(b.N)/1e9, "GFLOP/s")
}
