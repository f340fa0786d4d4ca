package cuda

// Timings of the tensor-core prefill products at the released widths, at
// 1,024 and 8,192 tokens: TFLOP/s (2·m·n·k over the kernel time) against the
// H200's ~1,980 TFLOP/s dense fp8 peak (~790 bf16). "GEMM" times the
// product on act_quant's codes and scales; "Quant" adds tc_quant_a, the pass
// MatmulFP8TC/FP4TC make over fake-quantised activations first. Run on the
// device with -test.bench TC -test.benchtime 20x.

import (
	"fmt"
	"testing"

	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/internal/numfmt"
)

// tcShapes are the prefill weight products: q-LoRA down and up, the output
// projection after the grouped LoRA, the shared expert's up and down.
var tcShapes = []struct {
	name string
	k, n int
	fp4  bool
}{
	{"wq_a", 5120, 1280, false}, {"wq_b", 1280, 32768, false}, {"wo_b", 8192, 5120, false},
	{"shared_up", 5120, 2304, false}, {"shared_down", 2304, 5120, false},
	{"expert_up_fp4", 5120, 2304, true}, {"expert_down_fp4", 2304, 5120, true},
}

func BenchmarkMatmulTC(b *testing.B) {
	for _, m := range []int{1024, 8192} {
		for _, c := range tcShapes {
			for _, quant := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/m=%d/quant=%v", c.name, m, quant), func(b *testing.B) { benchTC(b, m, c.k, c.n, c.fp4, quant) })
			}
			if !c.fp4 { // the wgmma kernel (off: see Kernels.WGMMA), for comparison
				b.Run(fmt.Sprintf("%s/m=%d/wgmma", c.name, m), func(b *testing.B) {
					benchTCWith(b, m, c.k, c.n, false, false, true)
				})
				b.Run(fmt.Sprintf("%s/m=%d/wgmma-f16", c.name, m), func(b *testing.B) {
					tcF16 = true
					defer func() { tcF16 = false }()
					benchTC(b, m, c.k, c.n, false, false)
				})
			}
		}
	}
}

func benchTC(b *testing.B, m, k, n int, fp4, quant bool) { benchTCWith(b, m, k, n, fp4, quant, false) }

// benchTCWith is benchTC with Kernels.WGMMA set to wgmma for the run.
func benchTCWith(b *testing.B, m, k, n int, fp4, quant, wgmma bool) {
	e := gpu(b)
	defer func(v bool) { e.k.WGMMA = v }(e.k.WGMMA)
	e.k.WGMMA = wgmma
	r := benchRand()
	// one 32-row slab of random activations repeated down the rows (the
	// host-side act_quant of 8192 × 8192 values would dominate the run)
	slab := bf16s(r, 32*k, 1)
	codes, scales := make([]byte, 32*k), make([]float32, 32*k/32)
	numfmt.ActQuant(slab, 32, codes, scales)
	a := make([]float32, 0, m*k)
	cs := make([]byte, 0, m*k)
	ss := make([]float32, 0, m*k/32)
	for len(a) < m*k {
		a, cs, ss = append(a, slab...), append(cs, codes...), append(ss, scales...)
	}
	var w, s driver.Ptr
	wBytes := n * k
	if fp4 {
		wBytes = n * k / 2
		w, s = up(b, e, randBytes(r, wBytes)), up(b, e, e8m0s(r, n*(k/32)))
	} else {
		w, s = up(b, e, e4m3Codes(r, wBytes)), up(b, e, e8m0s(r, ((n+31)/32)*(k/32)))
	}
	out := alloc(b, e, 4*m*n)
	var launch func() error
	if quant {
		da, scratch := up(b, e, a[:m*k]), alloc(b, e, TCScratchBytes(m, k))
		run := e.k.MatmulFP8TC
		if fp4 {
			run = e.k.MatmulFP4TC
		}
		launch = func() error { return run(e.s, "bench", out, da, m, k, w, s, n, scratch) }
	} else {
		dc, dsc := up(b, e, cs[:m*k]), up(b, e, ss[:m*k/32])
		run := e.k.MatmulFP8TCCodes
		if fp4 {
			run = e.k.MatmulFP4TCCodes
		}
		launch = func() error { return run(e.s, "bench", out, dc, dsc, m, k, w, s, n) }
	}
	us := timeLaunches(b, e, m*k+wBytes+4*m*n, launch)
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)/(us*1e6), "TFLOP/s")
}

// BenchmarkMatmulPlainTC is prefill's plain products on bf16 tensor cores
// (gemm_bf16.cuh): the grouped fp8 wo_a (8 groups of 4096 -> 1024, widened
// in the loader) and a bf16 5120 -> 4096 product, at 1,024 and 8,192 rows.
func BenchmarkMatmulPlainTC(b *testing.B) {
	for _, m := range []int{1024, 8192} {
		b.Run(fmt.Sprintf("wo_a_8x4096x1024/m=%d", m), func(b *testing.B) {
			e := gpu(b)
			r := benchRand()
			const groups, dg, rank = 8, 4096, 1024
			w, s := up(b, e, e4m3Codes(r, groups*rank*dg)), up(b, e, e8m0s(r, (groups*rank/32)*(dg/32)))
			o, out := up(b, e, bf16s(r, m*groups*dg, 1)), alloc(b, e, 4*m*groups*rank)
			us := timeLaunches(b, e, groups*rank*dg+4*m*groups*(dg+rank), func() error {
				return e.k.GroupedLoRA(e.s, "bench", out, o, m, groups, dg, Plain{W: w, Scale: s, Format: PlainFP8}, rank, true)
			})
			b.ReportMetric(2*float64(m)*float64(groups*rank)*float64(dg)/(us*1e6), "TFLOP/s")
		})
		b.Run(fmt.Sprintf("bf16_5120x4096/m=%d", m), func(b *testing.B) {
			e := gpu(b)
			r := benchRand()
			const k, n = 5120, 4096
			bits := make([]uint16, n*k)
			for i := range bits {
				bits[i] = numfmt.BF16Bits(float32(r.NormFloat64() * 0.02))
			}
			w, a, out := up(b, e, bits), up(b, e, bf16s(r, m*k, 1)), alloc(b, e, 4*m*n)
			us := timeLaunches(b, e, 2*n*k+4*m*(k+n), func() error {
				return e.k.MatmulF32(e.s, "bench", out, a, m, k, Plain{W: w, Format: PlainBF16}, n, true)
			})
			b.ReportMetric(2*float64(m)*float64(n)*float64(k)/(us*1e6), "TFLOP/s")
		})
	}
}
