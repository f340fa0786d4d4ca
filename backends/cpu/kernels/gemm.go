package kernels

import (
	"fmt"

	"github.com/ds4go/ds4/internal/numfmt"
)

// gemmBlock is the quantisation block of fp8/fp4 weights and of activations
// along K (spec §6: 32×32 fp8 weight blocks, 32-wide fp4 scale groups,
// act_quant block 32).
const gemmBlock = 32

// gemmCeil returns ceil(a/b) for positive b.
func gemmCeil(a, b int) int { return (a + b - 1) / b }

// gemmCheck panics unless every slice holds at least the elements its shape
// needs. Wrong lengths are programming errors of the caller (the graph
// compiler sized the buffers), not data errors.
func gemmCheck(op string, lens ...int) {
	for i := 0; i+1 < len(lens); i += 2 {
		if lens[i] < lens[i+1] {
			panic(fmt.Sprintf("kernels.%s: operand %d has %d elements, want %d", op, i/2, lens[i], lens[i+1]))
		}
	}
}

// MatmulFP8 is the reference fp8 GEMM (spec §6.5, kernel fp8_gemm with block
// 32): out[m,n] = bf16(C[m,n]) with
//
//	C[m,n] = Σ_kb P(m,n,kb) · e8m0(wScale[n/32, kb])    (fp32 accumulator, kb ascending)
//	P(m,n,kb) = Σ_{k∈kb} a[m,k] · e4m3(w[n,k])         (fp32, k ascending, starting from 0)
//
// a [m,k] holds the fake-quantised activations, i.e. the bf16 values q·s that
// numfmt.ActQuant (block 32) writes back; w is [n,k] e4m3 codes row-major and
// wScale the e8m0 bytes [ceil(n/32), ceil(k/32)]. Because every activation
// scale s is a power of two, P equals s·Σ q·w exactly, so this is
// bit-identical to the reference's Σ_kb (Σ q·w)·s·sb on the (q, s) pair, up to
// the summation order inside one 32-block (the kernel's tensor cores sum in an
// unspecified order). Each product a·w is exact in fp32 (≤ 4+4 significant
// bits); the block partials are rounded to fp32 as they are summed. A last
// K block shorter than 32 (k not a multiple of 32) sums only the existing
// columns; n need not be a multiple of 32 either. NaN codes propagate.
func MatmulFP8(out, a []float32, m, k int, w []byte, wScale []byte, n int) {
	kb := gemmCeil(k, gemmBlock)
	gemmCheck("MatmulFP8", len(out), m*n, len(a), m*k, len(w), n*k, len(wScale), gemmCeil(n, gemmBlock)*kb)
	wf := make([]float32, k)
	for j := range n {
		for c := range k {
			wf[c] = numfmt.E4M3ToF32(w[j*k+c])
		}
		sRow := wScale[(j/gemmBlock)*kb : (j/gemmBlock+1)*kb]
		for i := range m {
			out[i*n+j] = numfmt.BF16Round(gemmBlockDot(a[i*k:(i+1)*k], wf, sRow))
		}
	}
}

// gemmBlockDot returns Σ_kb (Σ_{c∈kb} a[c]·w[c]) · e8m0(scales[kb]) with the
// block partials and the accumulator in fp32, both summed in ascending order.
// The explicit float32 conversions forbid fused multiply-adds so the result
// does not depend on the target architecture.
func gemmBlockDot(a, w []float32, scales []byte) float32 {
	var acc float32
	for b := 0; b*gemmBlock < len(a); b++ {
		lo, hi := b*gemmBlock, min((b+1)*gemmBlock, len(a))
		var p float32
		for c := lo; c < hi; c++ {
			p += float32(a[c] * w[c])
		}
		acc += float32(p * numfmt.E8M0ToF32(scales[b]))
	}
	return acc
}

// MatmulFP4 is the reference fp4 GEMM (spec §6.5, kernel fp4_gemm with
// act_block 32): out[m,n] = bf16(C[m,n]) with
//
//	C[m,n] = Σ_kb P(m,n,kb) · e8m0(wScale[n, kb])       (fp32 accumulator, kb ascending)
//	P(m,n,kb) = Σ_{k∈kb} a[m,k] · e2m1(w[n,k])         (fp32, k ascending)
//
// a [m,k] are fake-quantised activations (bf16 values q·s from
// numfmt.ActQuant, block 32); w is packed [n, k/2] (element 2j in the low
// nibble of byte j, 2j+1 in the high nibble), wScale is e8m0 [n, ceil(k/32)].
// The reference widens the fp4 tile to fp8 and runs the fp8 GEMM, so the
// numerics (exact products, fp32 block partials, fp32 accumulation of the
// scaled partials in K order, bf16 output) are those of MatmulFP8. k must be
// even; a last K block shorter than 32 sums only the existing columns.
func MatmulFP4(out, a []float32, m, k int, w []byte, wScale []byte, n int) {
	if k%2 != 0 {
		panic(fmt.Sprintf("kernels.MatmulFP4: k = %d is odd (fp4 packs two values per byte)", k))
	}
	kb := gemmCeil(k, gemmBlock)
	gemmCheck("MatmulFP4", len(out), m*n, len(a), m*k, len(w), n*k/2, len(wScale), n*kb)
	wf := make([]float32, k)
	for j := range n {
		gemmUnpackFP4(wf, w[j*k/2:(j+1)*k/2])
		sRow := wScale[j*kb : (j+1)*kb]
		for i := range m {
			out[i*n+j] = numfmt.BF16Round(gemmBlockDot(a[i*k:(i+1)*k], wf, sRow))
		}
	}
}

// gemmUnpackFP4 decodes packed e2m1 codes (low nibble = even element) into
// dst, which has twice as many elements as packed.
func gemmUnpackFP4(dst []float32, packed []byte) {
	for j, b := range packed {
		dst[2*j] = numfmt.E2M1ToF32(b & 0xf)
		dst[2*j+1] = numfmt.E2M1ToF32(b >> 4)
	}
}

// gemmDot returns Σ_c a[c]·w[c] accumulated in fp32 in ascending c, each
// product rounded to fp32 before it is added (no fused multiply-add).
func gemmDot(a, w []float32) float32 {
	var acc float32
	for c := range a {
		acc += float32(a[c] * w[c])
	}
	return acc
}

// MatmulF32 computes out = a·wᵀ in fp32: out[i,j] = Σ_c a[i,c]·w[j,c] with
// a [m,k], w [n,k] (a Linear weight [out, in]), each product rounded to fp32
// and accumulated in fp32 in ascending c; out is fp32 [m,n], not rounded.
// This is the reference's F.linear on fp32 operands (gate logits, the head,
// the ratio-2 compressor, the hc mixes); torch's BLAS sums in another order,
// so results agree to a few fp32 ulps, not bit for bit.
func MatmulF32(out, a, w []float32, m, k, n int) {
	gemmCheck("MatmulF32", len(out), m*n, len(a), m*k, len(w), n*k)
	for i := range m {
		ar := a[i*k : (i+1)*k]
		for j := range n {
			out[i*n+j] = gemmDot(ar, w[j*k:(j+1)*k])
		}
	}
}

// MatmulBF16 computes out = bf16(a·wᵀ) for bf16 operands (values exactly
// representable in bf16): products are exact in fp32, accumulated in fp32 in
// ascending k, and the fp32 sum is rounded once to bf16 (torch's bf16 GEMM
// on CPU also accumulates in fp32). a [m,k], w [n,k], out [m,n].
func MatmulBF16(out, a, w []float32, m, k, n int) {
	gemmCheck("MatmulBF16", len(out), m*n, len(a), m*k, len(w), n*k)
	for i := range m {
		ar := a[i*k : (i+1)*k]
		for j := range n {
			out[i*n+j] = numfmt.BF16Round(gemmDot(ar, w[j*k:(j+1)*k]))
		}
	}
}

// GroupedLoRA is the block-diagonal output LoRA of attention (spec §4.5,
// einsum "bsgd,grd->bsgr" with the bf16 wo_a):
//
//	out[i, g*rank+r] = bf16( Σ_d o[i, g*dg+d] · woA[g*rank+r, d] )
//
// for i < m, g < groups, r < rank; o is [m, groups*dg], woA is
// [groups*rank, dg], out is [m, groups*rank]. fp32 accumulation in ascending
// d, one rounding to bf16.
func GroupedLoRA(out, o []float32, m, groups, dg int, woA []float32, rank int) {
	gemmCheck("GroupedLoRA", len(out), m*groups*rank, len(o), m*groups*dg, len(woA), groups*rank*dg)
	// Work items are (group, chunk of rc outputs); each runs every token
	// through its rows of woA (kept in L2), two tokens and four outputs at a
	// time. Every output is gemmDot's sum, unchanged.
	const rc = 32
	chunks := gemmCeil(rank, rc)
	parallelRange(groups*chunks, 1, m*groups*rank*dg, func(lo, hi int) {
		for it := lo; it < hi; it++ {
			g, r0 := it/chunks, (it%chunks)*rc
			r1 := min(rank, r0+rc)
			wrow := func(r int) []float32 { return woA[(g*rank+r)*dg : (g*rank+r+1)*dg] }
			orow := func(i int) []float32 { return o[(i*groups+g)*dg : (i*groups+g+1)*dg] }
			put := func(i, r int, v float32) { out[i*groups*rank+g*rank+r] = numfmt.BF16Round(v) }
			i := 0
			for ; i+2 <= m; i += 2 {
				a, b := orow(i), orow(i+1)
				r := r0
				for ; r+4 <= r1; r += 4 {
					v := gemmDot2x4(a, b, wrow(r), wrow(r+1), wrow(r+2), wrow(r+3))
					for q := range 4 {
						put(i, r+q, v[q])
						put(i+1, r+q, v[4+q])
					}
				}
				for ; r < r1; r++ {
					put(i, r, gemmDot(a, wrow(r)))
					put(i+1, r, gemmDot(b, wrow(r)))
				}
			}
			for ; i < m; i++ {
				a := orow(i)
				r := r0
				for ; r+4 <= r1; r += 4 {
					v0, v1, v2, v3 := gemmDot4(a, wrow(r), wrow(r+1), wrow(r+2), wrow(r+3))
					put(i, r, v0)
					put(i, r+1, v1)
					put(i, r+2, v2)
					put(i, r+3, v3)
				}
				for ; r < r1; r++ {
					put(i, r, gemmDot(a, wrow(r)))
				}
			}
		}
	})
}
