package fast

import (
	"math"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// kernelSet is the set of inner kernels of one level.
type kernelSet struct {
	level  Level
	mr, nr int
	// tile: C[i*ldc+j] += Σ_kk ap[kk*mr+i]·bp[kk*nr+j], i < mr, j < nr.
	tile func(ap, bp, c []float32, ldc, kc int)
	// dot returns Σ a[i]·b[i] (any length).
	dot func(a, b []float32) float32
	// dotFP8 returns Σ_b e8m0(s[b])·Σ a·e4m3(w) over len(s) full 32-blocks
	// and whether a NaN code was met; requires every s[b] ≤ maxFP8Scale.
	dotFP8 func(a []float32, w, s []byte) (float32, bool)
	// dotFP4 is dotFP8 for packed e2m1 (16 bytes per block); a is permuted
	// with group fp4Group; requires 1 ≤ s[b] ≤ 254.
	dotFP4   func(a []float32, w, s []byte) float32
	fp4Group int
	// gemvFP4, when set, sets out[i*ldo+j] = dotFP4 of activation rows
	// a[i*lda:] (i < r ≤ gemvRows, permuted by permuteFP4x64) and weight
	// rows j < rows (consecutive in w and s, nb blocks each, nb even),
	// dequantising every block once for all activation rows; any scale byte.
	gemvFP4 func(a []float32, lda, r int, w, s []byte, nb, rows int, out []float32, ldo int)
	// gemvFP4Q, when set, is gemvFP4 on activation rows packed by
	// packFP4Q (stride lda bytes), r ≤ gemvQRows.
	gemvFP4Q func(a []byte, lda, r int, w, s []byte, nb, rows int, out []float32, ldo int)
	// packFP4Q, when set with gemvFP4Q, is packFP4Q (the same bytes and
	// result).
	packFP4Q func(dst []byte, a []float32) bool
	// fp4QPairs: gemvFP4Q takes its activation rows interleaved in pairs
	// (pairFP4QRows: rows 2p and 2p+1 of a call in a[2p*lda:(2p+2)*lda], an
	// odd last row as packFP4Q leaves it) and gives the same bits.
	fp4QPairs bool
	// gemvFP8 is gemvFP4 for e4m3 rows of one 32-row group sharing the
	// block factors f (fp8Factor of scale bytes ≤ maxFP8Scale; activations
	// permuted by permuteFP8x32, any nb); it reports whether a NaN code was
	// met.
	gemvFP8 func(a []float32, lda, r int, w []byte, f []float32, nb, rows int, out []float32, ldo int) bool
	// fp8Pairs: gemvFP8 takes the activations permuted by
	// permuteFP8x32Pairs instead.
	fp8Pairs bool
	// fp8Rows, when set, is the most rows a gemvFP8 call takes on whole
	// blocks (else gemvRows).
	fp8Rows int
	// dotW16, when set, is dot with b as raw bf16 (bit-identical to dot on
	// the widened values).
	dotW16 func(a []float32, b []byte) float32
	// dotW16Rows, when set, sets out[i] = dotW16(a[i*lda:i*lda+len(b)/2],
	// b) bit for bit for i < r ≤ dotW16RowsMax (the weight row widened once).
	dotW16Rows func(a []float32, lda, r int, b []byte, out []float32)
	// loraFP8x8, when set, computes len(out) = 8 or 16 grouped-LoRA outputs
	// of e4m3 rows in one 32-row group (see loraFP8x8AVX2; scale bytes in
	// 10..134); it reports whether a NaN code was met (the outputs are then
	// wrong).
	loraFP8x8 func(x []float32, w []byte, ldw int, s []byte, nb int, out []float32) bool
	// qkF64, when set, sets out[x] = Σ_i qT[i*ldq+x]·k[i] (sequential
	// float64 sums) for x < 4g, g = 1, 2 or 4.
	qkF64 func(qT []float64, ldq int, k []float32, n int, out []float64, g int)
	// indexTerms, when set, sets t[j*h+i] = bf16(relu(bf16(e[j*h+i]))·w[i])
	// for the len(t)/h keys (h a multiple of 8), relu as the reference's
	// "if ev <= 0 { ev = 0 }".
	indexTerms func(t, e, w []float32, h int)
	// qkF32Keys, when set, sets out[j*8g+x] = Σ_i qT[i*ldq+x]·k[j][i] for
	// x < 8g (g = 1 or 2) and the keys j < 8/g: each lane one f32 FMA chain
	// over i (every k[j] a valid row of length n; repeat one to fill).
	qkF32Keys func(qT []float32, ldq int, k *[8][]float32, n int, out []float32, g int)
	// scaleAdd, when set, sets acc[i] = fl(acc[i]·alpha) + pv[i] (len(acc)
	// a multiple of 8).
	scaleAdd func(acc, pv []float32, alpha float32)
	// axpyF32, when set, adds p[j]·k[j][i] to pv[i] for the keys j < nk
	// (1 or 4) in order, one f32 FMA each (len(pv) a multiple of 8).
	axpyF32 func(pv []float32, p *[4]float32, k *[4][]float32, nk int)
	// qkF32K8, when set, is qkF32Keys with g = 2 for 8 keys (out[j*16+x],
	// j < 8), the same bits per head and key.
	qkF32K8 func(qT []float32, ldq int, k *[8][]float32, n int, out []float32)
	// axpyHeads, when set, is axpyF32 with 4 keys for the heads hs at
	// once: pv[h*d+i] gets p[4h+j]·k[j][i] for j = 0..3 in order (d a
	// multiple of 64, len(k[j]) ≥ d); the same bits as axpyF32 per head.
	axpyHeads func(pv []float32, d int, p []float32, hs []int32, k *[4][]float32)
	// pack8, when set, dequantises 8 weight rows (at w + l*ldw bytes) of
	// kind over nb 32-blocks (fp8, fp4) or 8-groups (bf16) into
	// dst[c*ldd+l] (scales folded in exactly; fp8 rows share the scale
	// bytes s, each ≤ maxFP8Scale, and have no NaN code; fp4 row l has its
	// scales at s[l*lds:]).
	pack8 func(kind wkind, dst []float32, ldd int, w []byte, ldw int, s []byte, lds, nb int)
	// actQuant, when set, runs numfmt.ActQuantInplace on one block (a
	// multiple of 8 elements) and reports true, or reports false (the block
	// untouched) when the block needs numfmt's general path (an Inf or NaN,
	// a scale outside the fast range).
	actQuant func(xb []float32) bool
	// expF32, when set, sets dst[i] = float32(math.Exp(float64(src[i])))
	// bit for bit (len(src) a multiple of 4) and reports true, or reports
	// false when some src[i] > 700 or is NaN (dst then partly written).
	expF32 func(dst, src []float32) bool
	// bf16Round, when set, is numfmt.BF16RoundSlice on len(x), a multiple
	// of 8.
	bf16Round func(x []float32)
	// swigluGate, when set, sets x[i] = −min(g[i], limit) (len(x) a multiple
	// of 8; limit +Inf for no clamp).
	swigluGate func(x, g []float32, limit float32)
	// swigluElem, when set, is kernels.SwiGLUElement in lanes: out[i] =
	// bf16(w·(−x[i]/(1+e[i])·clamp(u[i], ±limit))) (len(out) a multiple of
	// 8; limit +Inf for no clamps, w = 1 for no route weight).
	swigluElem func(out, x, e, u []float32, limit, w float32)
	// squares, when set, sets dst[i] = x[i]·x[i] (len(dst) a multiple of 8).
	squares func(dst, x []float32)
	// addRows32, when set, is a kernels.RowAdder for width 32.
	addRows32 kernels.RowAdder
	// rmsOut, when set, sets out[i] = bf16(w[i]·(x[i]·rs)) (len(out) a
	// multiple of 8).
	rmsOut func(out, x, w []float32, rs float32)
	// hcSum4, when set, sets out[d] = bf16(Σ_i c[i]·r_i[d]) (fp32, i
	// ascending from +0; len(out) a multiple of 8): HCPre's sum.
	hcSum4 func(out []float32, r *[4][]float32, c *[4]float32)
	// hcPost4, when set, is hcSum4 with bf16(p·y[d] + Σ_i c[i]·r_i[d]):
	// HCPost's output.
	hcPost4 func(out []float32, r *[4][]float32, c *[4]float32, y []float32, p float32)
	// sinkhorn8, when set, runs HCSplitSinkhorn4's iters row and column
	// normalisations of 8 tokens' matrices in lanes (c[e*8+t], e = 4·row +
	// column; len(c) ≥ 128), norm4's operations in its order.
	sinkhorn8 func(c []float32, iters int, eps float32)
	// lanes4, when set, is lanes32Go with 4 lanes for three panels at once:
	// out[4k+l] from panel p[k] ([n][4] each; repeat one to fill).
	lanes4 func(x []float32, p *[3][]float32, n int, out []float32)
	// lanes32, when set, is lanes32Go.
	lanes32 func(x, p []float32, n int, out []float32)
	// absMaxBits, when set, returns the largest bits(x[i]) &^ 0x80000000
	// (len(x) a multiple of 8, at least 8).
	absMaxBits func(x []float32) uint32
}

// dotW16RowsMax is the most activation rows of one dotW16Rows call.
const dotW16RowsMax = 6

// gemvRows is the most activation rows one gemv call takes.
const gemvRows = 4

// gemvQRows is the most activation rows one gemvFP4Q call takes (the
// largest AVX-512 kernel: 8 rows per weight pass; the AVX2 wrapper runs
// them as 6 + 2, its largest kernel fitting the 16 AVX2 vector registers).
const gemvQRows = 8

// maxFP8Scale is the largest e8m0 byte the fused fp8 kernels accept (the
// folded factor 2^(e−7) must stay finite).
const maxFP8Scale = 134

var (
	lutE4M3 [256]float32
	lutE2M1 [16]float32
	lutE8M0 [256]float32
)

func init() {
	for i := range 256 {
		lutE4M3[i] = numfmt.E4M3ToF32(byte(i))
		lutE8M0[i] = numfmt.E8M0ToF32(byte(i))
	}
	for i := range 16 {
		lutE2M1[i] = numfmt.E2M1ToF32(byte(i))
	}
}

var portable = &kernelSet{
	level: Portable, mr: 4, nr: 8,
	tile:     tileGo,
	dot:      dotGo,
	dotFP8:   dotFP8Go,
	dotFP4:   dotFP4Go,
	fp4Group: 2,
	dotW16:   dotGoBF16,
}

func current() *kernelSet {
	switch CurrentLevel() {
	case AVX512:
		return avx512Set
	case AVX2:
		return avx2Set
	}
	return portable
}

func tileGo(ap, bp, c []float32, ldc, kc int) {
	const mr, nr = 4, 8
	var acc [mr][nr]float32
	ap, bp = ap[:kc*mr], bp[:kc*nr]
	for kk := range kc {
		a := ap[kk*mr : kk*mr+mr : kk*mr+mr]
		b := bp[kk*nr : kk*nr+nr : kk*nr+nr]
		for i := range mr {
			ai := a[i]
			r := &acc[i]
			for j := range nr {
				r[j] += ai * b[j]
			}
		}
	}
	for i := range mr {
		row := c[i*ldc : i*ldc+nr]
		for j := range nr {
			row[j] += acc[i][j]
		}
	}
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotFP8Go(a []float32, w, s []byte) (float32, bool) {
	var acc float32
	for bi, e := range s {
		aa := a[bi*block : bi*block+block]
		ww := w[bi*block : bi*block+block]
		var p0, p1 float32
		for c := 0; c < block; c += 2 {
			p0 += aa[c] * lutE4M3[ww[c]]
			p1 += aa[c+1] * lutE4M3[ww[c+1]]
		}
		acc += (p0 + p1) * lutE8M0[e]
	}
	return acc, false
}

func dotFP4Go(a []float32, w, s []byte) float32 {
	var acc float32
	for bi, e := range s {
		aa := a[bi*block : bi*block+block]
		ww := w[bi*block/2 : bi*block/2+block/2]
		var p0, p1 float32
		for j, b := range ww {
			p0 += aa[2*j] * lutE2M1[b&15]
			p1 += aa[2*j+1] * lutE2M1[b>>4]
		}
		acc += (p0 + p1) * lutE8M0[e]
	}
	return acc
}

// permuteFP4 writes a (length multiple of g) into dst so that each group of g
// elements lists its even elements, then its odd ones.
func permuteFP4(dst, a []float32, g int) {
	h := g / 2
	for base := 0; base+g <= len(a); base += g {
		src := a[base : base+g]
		d := dst[base : base+g]
		for j := range h {
			d[j] = src[2*j]
			d[h+j] = src[2*j+1]
		}
	}
}

// fp4x64Base is the first element (within a 32-block) of the 4 elements
// 4d+base (d < 4) that vector v of gemvFP4AVX2 holds in each of its lanes.
var fp4x64Base = [8]int{0, 2, 16, 18, 1, 3, 17, 19}

// permuteFP4x64 writes each 64-element chunk of a (two 32-blocks) to dst in
// the order in which gemvFP4AVX2 produces the weights: vector v (8 floats)
// holds elements base_v+4d of the first block in lanes 0..3 and of the
// second block in lanes 4..7. Elements past the last whole chunk are copied.
func permuteFP4x64(dst, a []float32) {
	n := len(a) &^ 63
	for c := 0; c < n; c += 64 {
		src := a[c : c+64 : c+64]
		d := dst[c : c+64 : c+64]
		for v, b := range fp4x64Base {
			for l := range 2 {
				for q := range 4 {
					d[v*8+l*4+q] = src[l*32+b+4*q]
				}
			}
		}
	}
	copy(dst[n:len(a)], a[n:])
}

// fp8x32Offset is the element (within 4d+offset, d < 8) of a 32-block that
// vector v of gemvFP8AVX2 holds in its lane d.
var fp8x32Offset = [4]int{1, 3, 0, 2}

// permuteFP8x32 writes each 32-element block of a, times s, to dst in the
// order in which gemvFP8AVX2 produces the weights (see fp8x32Offset).
// Elements past the last whole block are copied (not scaled).
func permuteFP8x32(dst, a []float32, s float32) {
	n := len(a) &^ 31
	for c := 0; c < n; c += 32 {
		src := a[c : c+32 : c+32]
		d := dst[c : c+32 : c+32]
		for v, off := range fp8x32Offset {
			for l := range 8 {
				d[v*8+l] = src[4*l+off] * s
			}
		}
	}
	copy(dst[n:len(a)], a[n:])
}

// permuteFP8x32Pairs is permuteFP8x32 with the four 8-element vectors of
// each pair of whole blocks interleaved: [v0 of block 2p, v0 of block 2p+1,
// v1, v1, …] (gemvFP8AVX512 reads a pair's vector q as one zmm); an odd
// last whole block and the partial tail are left as permuteFP8x32 writes
// them.
func permuteFP8x32Pairs(dst, a []float32, s float32) {
	n := len(a) &^ 63
	for c := 0; c < n; c += 64 {
		src := a[c : c+64 : c+64]
		d := dst[c : c+64 : c+64]
		for v, off := range fp8x32Offset {
			for l := range 8 {
				d[16*v+l] = src[4*l+off] * s
				d[16*v+8+l] = src[32+4*l+off] * s
			}
		}
	}
	permuteFP8x32(dst[n:len(a)], a[n:], s)
}

// fp8Factor is the factor of gemvFP8 for an e8m0 scale byte s: 2^(s−7), the
// scale 2^(s−127) times the 2^120 the bit placement of e4m3 codes drops.
func fp8Factor(s byte) float32 { return math.Float32frombits((uint32(s) + 120) << 23) }

// The fp8 GEMVs place each e4m3 code's bits in an f32, which reads as its
// value times 2^-120, so a product with an activation is a subnormal f32
// whenever |a·w| < 2^-6: common in a model's activations. Subnormal
// results round away low bits, and Intel cores compute them by microcode
// assists (on a model-167 Xeon decode ran at 58.7 % of the probe, 67 %
// with the products kept normal). So the activations of whole blocks are
// multiplied by 2^fp8PreScaleExp as they are permuted and the block
// factors divided by it (fp8FactorPre): powers of two, so wherever the
// old products were normal the sums are the same floats, and elsewhere
// they are the exact products' roundings. A row with a finite |a| ≥
// 2^(128−fp8PreScaleExp) (fp8Scalable false) keeps the old scaling.
const fp8PreScaleExp = 64

// fp8PreScale is 2^fp8PreScaleExp.
var fp8PreScale = math.Float32frombits((127 + fp8PreScaleExp) << 23)

// fp8FactorPre is fp8Factor divided by fp8PreScale: 2^(s−7−64), a normal
// f32 for every byte.
func fp8FactorPre(s byte) float32 {
	return math.Float32frombits((uint32(s) + 120 - fp8PreScaleExp) << 23)
}

// fp8Scalable reports whether a row of activations may be multiplied by
// fp8PreScale without overflow: every finite |a| < 2^(128−fp8PreScaleExp)
// (NaN and ±Inf stay what they are).
func fp8Scalable(ks *kernelSet, a []float32) bool {
	const limit = (127 + 128 - fp8PreScaleExp) << 23 // the bits of 2^(128−64)
	if n := len(a) &^ 7; ks.absMaxBits != nil && n > 0 {
		mx := ks.absMaxBits(a[:n]) // Inf and NaN included: the scan below tells them apart
		for _, v := range a[n:] {
			mx = max(mx, math.Float32bits(v)&^(1<<31))
		}
		if mx < limit {
			return true
		}
	}
	var mx uint32
	for _, v := range a {
		if u := math.Float32bits(v) &^ (1 << 31); u < 0x7f800000 && u > mx {
			mx = u
		}
	}
	return mx < limit
}

// fp4Consts are the constants of gemvFP4AVX2: the low and the high byte of
// the bf16 value of each e2m1 code (a 16-byte table per 128-bit lane), 0x0F
// bytes and the 0xFFFF0000 dword mask.
var fp4Consts [128]byte

func init() {
	for i := range 16 {
		b := math.Float32bits(lutE2M1[i]) >> 16
		for l := range 2 {
			fp4Consts[16*l+i] = byte(b)
			fp4Consts[32+16*l+i] = byte(b >> 8)
		}
	}
	for i := range 32 {
		fp4Consts[64+i] = 0x0F
		if i%4 >= 2 {
			fp4Consts[96+i] = 0xFF
		}
	}
}
