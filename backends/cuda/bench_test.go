package cuda

// Device timings of the kernels at the released model's widths (dim 5120,
// moe_inter 2304, 384 experts, head dim 512, 64 heads), timed with CUDA
// events over b.N back-to-back launches after one warm-up launch. They
// report microseconds per launch and the bandwidth over the bytes the
// kernel must move (each input read once, each output written once), the
// measure against the ~4.3 TB/s copy ceiling of the H200. Run with
// -test.bench . on the device machine; they skip without a GPU.

import (
	"math/rand/v2"
	"testing"
)

// timeLaunches times b.N launches with events, reports µs/launch and GB/s
// for the given byte count, and returns the µs.
func timeLaunches(b *testing.B, e *gpuEnv, bytes int, launch func() error) float64 {
	b.Helper()
	if err := launch(); err != nil { // warm-up (module load, caches)
		b.Fatal(err)
	}
	start, err := e.c.NewEvent()
	if err != nil {
		b.Fatal(err)
	}
	defer start.Destroy()
	end, err := e.c.NewEvent()
	if err != nil {
		b.Fatal(err)
	}
	defer end.Destroy()
	b.ResetTimer()
	if err := start.Record(e.s); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if err := launch(); err != nil {
			b.Fatal(err)
		}
	}
	if err := end.Record(e.s); err != nil {
		b.Fatal(err)
	}
	ms, err := end.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	us := float64(ms) * 1e3 / float64(b.N)
	b.ReportMetric(us, "us/launch")
	b.ReportMetric(float64(bytes)/(us*1e3), "GB/s")
	return us
}

// benchRand gives the benchmarks fixed random data (never zeros).
func benchRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func BenchmarkMatmulFP4Decode(b *testing.B) { benchFP4(b, 1, 5120, 2304) }
func BenchmarkMatmulFP4Down(b *testing.B)   { benchFP4(b, 1, 2304, 5120) }

func benchFP4(b *testing.B, m, k, n int) {
	e := gpu(b)
	r := benchRand()
	a, w, s := up(b, e, quantActs(r, m, k)), up(b, e, randBytes(r, n*k/2)), up(b, e, e8m0s(r, n*k/32))
	out := alloc(b, e, 4*m*n)
	timeLaunches(b, e, n*k/2+n*k/32+4*m*(k+n), func() error { return e.k.MatmulFP4(e.s, "bench", out, a, m, k, w, s, n) })
}

// BenchmarkMatmulRoutedDecode: one token's 6 experts (up projection) out
// of a stack of 16.
func BenchmarkMatmulRoutedDecode(b *testing.B) {
	e := gpu(b)
	r := benchRand()
	const topk, experts, k, n = 6, 16, 5120, 2304
	wPer, sPer := n*k/2, n*k/32
	ids := make([]int64, topk)
	for i := range ids {
		ids[i] = int64(2 * i)
	}
	a, w, s := up(b, e, quantActs(r, 1, k)), up(b, e, randBytes(r, experts*wPer)), up(b, e, e8m0s(r, experts*sPer))
	rt := Routed{FP4: true, W: w, Scale: s, WStride: wPer, ScaleStride: sPer, Experts: experts}
	dids, out := up(b, e, ids), alloc(b, e, 4*topk*n)
	timeLaunches(b, e, topk*(wPer+sPer), func() error { return e.k.MatmulRouted(e.s, "bench", out, a, topk, k, rt, n, dids, topk) })
}

func BenchmarkMatmulFP8Decode(b *testing.B)  { benchFP8(b, 1, 5120, 1280) }
func BenchmarkMatmulFP8Prefill(b *testing.B) { benchFP8(b, 256, 5120, 5120) }

func benchFP8(b *testing.B, m, k, n int) {
	e := gpu(b)
	r := benchRand()
	a, w, s := up(b, e, quantActs(r, m, k)), up(b, e, e4m3Codes(r, n*k)), up(b, e, e8m0s(r, (n/32)*(k/32)))
	out := alloc(b, e, 4*m*n)
	us := timeLaunches(b, e, n*k+4*m*(k+n), func() error { return e.k.MatmulFP8(e.s, "bench", out, a, m, k, w, s, n) })
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)/(us*1e6), "TFLOP/s")
}

func BenchmarkRMSNorm(b *testing.B) {
	e := gpu(b)
	r := benchRand()
	const rows, dim = 256, 5120
	x, w := up(b, e, bf16s(r, rows*dim, 1)), up(b, e, bf16s(r, dim, 1))
	out := alloc(b, e, 4*rows*dim)
	timeLaunches(b, e, 8*rows*dim, func() error { return e.k.RMSNorm(e.s, "bench", out, x, w, rows, dim, 1e-20) })
}

func BenchmarkActQuant(b *testing.B) {
	e := gpu(b)
	r := benchRand()
	const n = 256 * 5120
	x := up(b, e, bf16s(r, n, 1))
	out := alloc(b, e, 4*n)
	timeLaunches(b, e, 8*n, func() error { return e.k.ActQuant(e.s, "bench", out, x, 0, 0, n, 32) })
}

func BenchmarkGateDecode(b *testing.B) {
	e := gpu(b)
	r := benchRand()
	const dim, experts, topk = 5120, 384, 6
	x, w := up(b, e, bf16s(r, dim, 1)), up(b, e, bf16s(r, experts*dim, 0.02))
	wt, ix, lg := alloc(b, e, 4*topk), alloc(b, e, 8*topk), alloc(b, e, 4*experts)
	timeLaunches(b, e, 4*experts*dim, func() error {
		return e.k.Gate(e.s, "bench", wt, ix, lg, x, 1, dim, w, 0, experts, topk, 1.5, "sqrtsoftplus")
	})
}

func BenchmarkHCMixesDecode(b *testing.B) {
	e := gpu(b)
	r := benchRand()
	const hc, dim = 4, 5120
	mix := (2 + hc) * hc
	h, fn := up(b, e, bf16s(r, hc*dim, 1)), up(b, e, bf16s(r, mix*hc*dim, 0.01))
	out := alloc(b, e, 4*mix)
	timeLaunches(b, e, 4*(mix+1)*hc*dim, func() error { return e.k.HCMixes(e.s, "bench", out, h, 1, hc, dim, fn, 1e-20) })
}

func BenchmarkSparseAttnDecode(b *testing.B) {
	e := gpu(b)
	r := benchRand()
	const h, d, n, t = 64, 512, 4096, 640
	q, kv := up(b, e, bf16s(r, h*d, 1)), up(b, e, bf16s(r, n*d, 1))
	sink := up(b, e, bf16s(r, h, 1))
	ids := make([]int32, t)
	for i := range ids {
		ids[i] = int32(r.IntN(n))
	}
	idx := up(b, e, ids)
	out := alloc(b, e, 4*h*d)
	timeLaunches(b, e, 4*(2*h*d+t*d), func() error {
		return e.k.SparseAttn(e.s, "bench", out, q, 1, 1, h, d, kv, n, sink, idx, t, 0.04)
	})
}
