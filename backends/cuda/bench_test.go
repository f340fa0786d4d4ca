package cuda

// Device timings of the kernels at the released model's widths (dim 5120,
// moe_inter 2304, 384 experts, head dim 512, 64 heads), timed with CUDA
// events over b.N back-to-back launches after one warm-up launch. They
// report microseconds per launch and the bandwidth over the bytes the
// kernel must move (each input read once, each output written once), the
// measure against the ~4.3 TB/s copy ceiling of the H200. Run with
// -test.bench . on the device machine; they skip without a GPU.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/internal/numfmt"
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
	scratch := alloc(b, e, int(SparseAttnScratch(1, 1, h, d, t)))
	for _, form := range []struct {
		name    string
		scratch driver.Ptr
	}{{"one-kernel", 0}, {"decode-form", scratch}} {
		b.Run(form.name, func(b *testing.B) {
			timeLaunches(b, e, 4*(2*h*d+t*d), func() error {
				return e.k.SparseAttn(e.s, "bench", out, q, 1, 1, h, d, kv, n, 0, 0, sink, idx, t, 0.04, form.scratch)
			})
		})
	}
}

// The decode kernels of gemv.cuh on the released shapes. Each reports the
// bandwidth over the bytes it must move (weights and scales read once,
// activations read, outputs written) and that as a share of the H200's
// 4.3 TB/s copy rate ("%of4.3TB"). Weights smaller than a few L2 caches
// (50 MB on the H200) are replicated and the launches rotate over the
// copies, so every launch reads its weights from HBM, as a decode step does.

// hbmCopy is the copy bandwidth the decode targets are measured against.
const hbmCopy = 4.3e12

// l2Rotate is the bytes the rotated copies of one benchmark's weights add
// up to at least (4× the H200's 50 MB L2).
const l2Rotate = 200 << 20

// rotations is the number of copies of bytes that rotating needs (1..64).
func rotations(bytes int) int {
	return min(64, max(1, ceilDiv(l2Rotate, max(bytes, 1))))
}

// replicate uploads v and n-1 device copies of it, back to back; it returns
// the first copy (copy i at + i·len(v) bytes).
func replicate(b *testing.B, e *gpuEnv, v []byte, n int) driver.Ptr {
	b.Helper()
	p := alloc(b, e, n*len(v))
	if err := Upload(e.s, p, v, b.Name()); err != nil {
		b.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if err := e.s.Copy(p+driver.Ptr(i*len(v)), p, len(v), b.Name()); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// reportDecode times the launches (launch(i) runs rotation i mod n) and
// reports GB/s and the share of hbmCopy for the given bytes a launch moves.
func reportDecode(b *testing.B, e *gpuEnv, bytes, n int, launch func(i int) error) {
	b.Helper()
	i := 0
	us := timeLaunches(b, e, bytes, func() error {
		err := launch(i % n)
		i++
		return err
	})
	b.ReportMetric(100*float64(bytes)/(us*1e-6)/hbmCopy, "%of4.3TB")
}

// decodeFP8Shapes are the fp8 projections of a decode step (k, n).
var decodeFP8Shapes = []struct {
	name string
	k, n int
}{
	{"wq_a", 5120, 1280}, {"wq_b", 1280, 32768}, {"wkv", 5120, 512}, {"wo_b", 8192, 5120},
	{"shared_w1", 5120, 2304}, {"shared_w2", 2304, 5120}, {"index_wq_b", 1280, 4096},
}

// BenchmarkDecodeFP8 runs MatmulFP8 at 1 and 4 tokens, tensor-core and exact
// kernels (gemv_mma_fp8_mR, gemv_fp8_mR).
func BenchmarkDecodeFP8(b *testing.B) {
	for _, c := range decodeFP8Shapes {
		for _, m := range []int{1, 4} {
			gemvBenchModes(b, fmt.Sprintf("%s_%dx%d_m%d", c.name, c.k, c.n, m), func(b *testing.B, e *gpuEnv) {
				r := benchRand()
				wb, sb := c.n*c.k, ceilDiv(c.n, 32)*ceilDiv(c.k, 32)
				rot := rotations(wb)
				w, s := replicate(b, e, e4m3Codes(r, wb), rot), replicate(b, e, e8m0s(r, sb), rot)
				a, out := up(b, e, quantActs(r, m, c.k)), alloc(b, e, 4*m*c.n)
				reportDecode(b, e, wb+sb+4*m*(c.k+c.n), rot, func(i int) error {
					return e.k.MatmulFP8(e.s, "bench", out, a, m, c.k, w+driver.Ptr(i*wb), s+driver.Ptr(i*sb), c.n)
				})
			})
		}
	}
}

// BenchmarkDecodeFP8Old is the split-K row kernel gemv.cuh replaces, on
// wq_a and wo_b (for the before/after).
func BenchmarkDecodeFP8Old(b *testing.B) {
	for _, c := range []struct{ k, n int }{{5120, 1280}, {8192, 5120}} {
		b.Run(fmt.Sprintf("%dx%d", c.k, c.n), func(b *testing.B) {
			e := gpu(b)
			r := benchRand()
			wb, sb := c.n*c.k, ceilDiv(c.n, 32)*ceilDiv(c.k, 32)
			rot := rotations(wb)
			w, s := replicate(b, e, e4m3Codes(r, wb), rot), replicate(b, e, e8m0s(r, sb), rot)
			a, out := up(b, e, quantActs(r, 1, c.k)), alloc(b, e, 4*c.n)
			g, bl := gemvGrid(c.n, 1)
			reportDecode(b, e, wb+sb+4*(c.k+c.n), rot, func(i int) error {
				return e.k.launch(e.s, "matmul_fp8_gemv", "bench", g, bl, gemvShared(c.k), driver.P(out), driver.P(a), driver.I(c.k),
					driver.P(w+driver.Ptr(i*wb)), driver.P(s+driver.Ptr(i*sb)), driver.I(c.n))
			})
		})
	}
}

// routedBench sets up a stack of the 384 released experts (one random
// expert copied to all) and 16 rotating choices of 6 distinct experts
// (16 × 6 experts of w1 = 566 MB, past the L2).
func routedBench(b *testing.B, e *gpuEnv, k, n int) (Routed, []driver.Ptr, int) {
	b.Helper()
	const experts, topk, sets = 384, 6, 16
	r := benchRand()
	wPer, sPer := n*k/2, n*ceilDiv(k, 32)
	rt := Routed{FP4: true, W: replicate(b, e, randBytes(r, wPer), experts), Scale: replicate(b, e, e8m0s(r, sPer), experts),
		WStride: wPer, ScaleStride: sPer, Experts: experts}
	ids := make([]driver.Ptr, sets)
	for i := range ids {
		v := make([]int64, topk)
		for j, p := range r.Perm(experts)[:topk] {
			v[j] = int64(p)
		}
		ids[i] = up(b, e, v)
	}
	return rt, ids, topk * (wPer + sPer)
}

// BenchmarkDecodeRoutedFP4 is one token's 6 chosen experts of 384 (ids on
// the GPU): the gate (or up) projection 5120 -> 2304 and the down
// projection 2304 -> 5120, gemv_routed_fp4.
func BenchmarkDecodeRoutedFP4(b *testing.B) {
	for _, c := range []struct {
		name       string
		k, n, adiv int
	}{{"w1_5120x2304", 5120, 2304, 6}, {"w2_2304x5120", 2304, 5120, 1}} {
		gemvBenchModes(b, c.name, func(b *testing.B, e *gpuEnv) {
			rt, ids, wbytes := routedBench(b, e, c.k, c.n)
			r := benchRand()
			a, out := up(b, e, quantActs(r, 6/c.adiv, c.k)), alloc(b, e, 4*6*c.n)
			reportDecode(b, e, wbytes+4*(6/c.adiv*c.k+6*c.n), len(ids), func(i int) error {
				return e.k.MatmulRouted(e.s, "bench", out, a, c.adiv, c.k, rt, c.n, ids[i], 6)
			})
		})
	}
}

// BenchmarkDecodeRoutedSwiGLU is the fused gate + up projections and
// SwiGLU of one token's 6 experts (w1 and w3: 2 × 6 × 5.9 MB).
func BenchmarkDecodeRoutedSwiGLU(b *testing.B) {
	gemvBenchModes(b, "w1w3_5120x2304", func(b *testing.B, e *gpuEnv) {
		const k, n = 5120, 2304
		rt1, ids, wbytes := routedBench(b, e, k, n)
		rt3, _, _ := routedBench(b, e, k, n)
		r := benchRand()
		a, out, rw := up(b, e, quantActs(r, 1, k)), alloc(b, e, 4*6*n), up(b, e, []float32{0.1, 0.2, 0.3, 0.1, 0.2, 0.1})
		reportDecode(b, e, 2*wbytes+4*(k+6*n+6), len(ids), func(i int) error {
			return e.k.MatmulRoutedSwiGLU(e.s, "bench", out, a, 6, k, rt1, rt3, n, ids[i], 6, 10, rw)
		})
	})
}

// gemvBenchModes runs f as name/mma (the tensor-core decode kernels) and
// name/exact (Kernels.Exact).
func gemvBenchModes(b *testing.B, name string, f func(b *testing.B, e *gpuEnv)) {
	for _, mode := range []string{"mma", "exact"} {
		b.Run(name+"/"+mode, func(b *testing.B) {
			e := gpu(b)
			defer func(v bool) { e.k.Exact = v }(e.k.Exact)
			e.k.Exact = mode == "exact"
			f(b, e)
		})
	}
}

// BenchmarkDecodeRoutedFP4Old is the split-K routed kernel gemv.cuh
// replaces (w1, one token's 6 experts of 384).
func BenchmarkDecodeRoutedFP4Old(b *testing.B) {
	e := gpu(b)
	const k, n = 5120, 2304
	rt, ids, wbytes := routedBench(b, e, k, n)
	r := benchRand()
	a, out := up(b, e, quantActs(r, 1, k)), alloc(b, e, 4*6*n)
	g, bl := gemvGrid(n, 6)
	reportDecode(b, e, wbytes+4*(k+6*n), len(ids), func(i int) error {
		return e.k.launch(e.s, "matmul_fp4_routed", "bench", g, bl, gemvShared(k), driver.P(out), driver.P(a), driver.I(6), driver.I(k),
			driver.P(rt.W), driver.L(rt.WStride), driver.P(rt.Scale), driver.L(rt.ScaleStride), driver.I(n), driver.P(ids[i]), driver.I(rt.Experts))
	})
}

// BenchmarkDecodeHead is the bf16 head, 5120 -> 129280 (1.3 GB of
// weights), at 1 and 4 tokens.
func BenchmarkDecodeHead(b *testing.B) {
	for _, m := range []int{1, 4} {
		gemvBenchModes(b, fmt.Sprintf("m%d", m), func(b *testing.B, e *gpuEnv) {
			r := benchRand()
			const k, n, chunk = 5120, 129280, 1280 // 101 copies of 1280 random rows
			bits := make([]byte, 2*chunk*k)
			for i := 0; i < len(bits); i += 2 {
				v := numfmt.BF16Bits(float32(r.NormFloat64() * 0.02))
				bits[i], bits[i+1] = byte(v), byte(v>>8)
			}
			w := replicate(b, e, bits, n/chunk)
			a, out := up(b, e, bf16s(r, m*k, 1)), alloc(b, e, 4*m*n)
			reportDecode(b, e, 2*n*k+4*m*(k+n), 1, func(int) error {
				return e.k.MatmulF32(e.s, "bench", out, a, m, k, Plain{W: w, Format: PlainBF16}, n, false)
			})
		})
	}
}

// BenchmarkDecodeGroupedWoA is the grouped output LoRA on the fp8 wo_a as
// stored (8 groups of 4096 -> 1024, widened in the kernel).
func BenchmarkDecodeGroupedWoA(b *testing.B) {
	gemvBenchModes(b, "8x4096x1024", func(b *testing.B, e *gpuEnv) {
		r := benchRand()
		const groups, dg, rank = 8, 4096, 1024
		wb, sb := groups*rank*dg, (groups*rank/32)*(dg/32)
		rot := rotations(wb)
		w, s := replicate(b, e, e4m3Codes(r, wb), rot), replicate(b, e, e8m0s(r, sb), rot)
		o, out := up(b, e, bf16s(r, groups*dg, 1)), alloc(b, e, 4*groups*rank)
		reportDecode(b, e, wb+sb+4*groups*(dg+rank), rot, func(i int) error {
			return e.k.GroupedLoRA(e.s, "bench", out, o, 1, groups, dg, Plain{W: w + driver.Ptr(i*wb), Scale: s + driver.Ptr(i*sb), Format: PlainFP8}, rank, true)
		})
	})
}

// BenchmarkCopyBandwidth is cuMemcpyDtoD of 2 GiB (bytes read + written),
// the floor the decode kernels are measured against, in the same run.
func BenchmarkCopyBandwidth(b *testing.B) {
	e := gpu(b)
	const n = 2 << 30
	src, dst := alloc(b, e, n), alloc(b, e, n)
	reportDecode(b, e, 2*n, 1, func(int) error { return e.s.Copy(dst, src, n, "bench") })
}

// BenchmarkLaunchEmpty is the stream's launch rate on an empty kernel
// (pdl_ready): the host's cost a launch, below which a short kernel's
// us/launch in these benchmarks measures the host, not the GPU. "bound"
// launches inside Stream.Bound, as a program's calls do.
func BenchmarkLaunchEmpty(b *testing.B) {
	b.Run("graph", benchGraphEmpty)
	for _, bound := range []bool{false, true} {
		b.Run(map[bool]string{false: "each", true: "bound"}[bound], func(b *testing.B) {
			e := gpu(b)
			f, err := e.k.mod.Function("pdl_ready")
			if err != nil {
				b.Fatal(err)
			}
			one := driver.Dim3{X: 1, Y: 1, Z: 1}
			launch := func() error { return e.s.Launch(f, one, one, 0, "bench") }
			if !bound {
				timeLaunches(b, e, 0, launch)
				return
			}
			if err := e.s.Bound(func() error { timeLaunches(b, e, 0, launch); return nil }); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchGraphEmpty: the same empty kernel as 64 nodes of one captured
// graph, replayed; the figure is per node (what a graph's kernel boundary
// costs the GPU, against a plain launch's host cost above).
func benchGraphEmpty(b *testing.B) {
	e := gpu(b)
	if !driver.GraphsSupported() {
		b.Skip("no graph functions in this driver")
	}
	f, err := e.k.mod.Function("pdl_ready")
	if err != nil {
		b.Fatal(err)
	}
	const nodes = 64
	one := driver.Dim3{X: 1, Y: 1, Z: 1}
	var t driver.Tape
	gs := &driver.Graphs{}
	defer gs.Release(e.c)
	replay := func() error {
		e.s.BeginTape(&t)
		for range nodes {
			if err := e.s.Launch(f, one, one, 0, "bench"); err != nil {
				return err
			}
		}
		return e.s.RunTape(e.s.EndTape(), gs)
	}
	us := timeLaunches(b, e, 0, replay)
	if gs.Off {
		b.Fatalf("graphs turned off: %s", gs.Why)
	}
	b.ReportMetric(us/nodes, "us/node")
}
