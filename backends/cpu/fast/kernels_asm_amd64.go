package fast

import (
	"math"
	"strings"

	"golang.org/x/sys/cpu"

	"github.com/ds4go/ds4/internal/numfmt"
)

func detect() Level {
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasFMA:
		return AVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return AVX2
	}
	return Portable
}

// unsupported names the CPU features level l needs that this CPU lacks.
func unsupported(l Level) string {
	var miss []string
	need := func(has bool, name string) {
		if !has {
			miss = append(miss, name)
		}
	}
	switch l {
	case AVX2:
		need(cpu.X86.HasAVX2, "AVX2")
		need(cpu.X86.HasFMA, "FMA")
	case AVX512:
		need(cpu.X86.HasAVX512F, "AVX-512F")
		need(cpu.X86.HasFMA, "FMA")
	}
	if len(miss) == 0 {
		return ""
	}
	return "the CPU lacks " + strings.Join(miss, " and ")
}

// dotOf wraps a vector dot kernel of the given lane count: the elements
// past its last whole vector are added in Go (dotGo).
func dotOf(lanes int, k func(a, b *float32, n int) float32) func(a, b []float32) float32 {
	return func(a, b []float32) float32 {
		n := len(a) / lanes * lanes
		var s float32
		if n > 0 {
			_ = b[n-1]
			s = k(&a[0], &b[0], n)
		}
		return s + dotGo(a[n:], b[n:len(a)])
	}
}

// dotW16Of is dotOf for a kernel reading b as raw bf16 (2 bytes a value).
func dotW16Of(lanes int, k func(a *float32, b *byte, n int) float32) func(a []float32, b []byte) float32 {
	return func(a []float32, b []byte) float32 {
		n := len(a) / lanes * lanes
		var s float32
		if n > 0 {
			_ = b[2*n-1]
			s = k(&a[0], &b[0], n)
		}
		return s + dotGoBF16(a[n:], b[2*n:2*len(a)])
	}
}

// gemvEmpty handles the fp4 gemv wrappers' degenerate calls (no weight
// rows: nothing; no blocks: zeros) and reports whether the call is done.
func gemvEmpty(r, nb, rows int, out []float32, ldo int) bool {
	if rows == 0 {
		return true
	}
	if nb == 0 {
		for i := range r {
			clear(out[i*ldo : i*ldo+rows])
		}
		return true
	}
	return false
}

// dotFP8Of wraps a fused fp8 dot kernel over len(s) whole 32-blocks.
func dotFP8Of(k func(a *float32, w, s *byte, nb int) (float32, uint32)) func(a []float32, w, s []byte) (float32, bool) {
	return func(a []float32, w, s []byte) (float32, bool) {
		if len(s) == 0 {
			return 0, false
		}
		nb := len(s)
		_, _ = a[nb*32-1], w[nb*32-1]
		r, nan := k(&a[0], &w[0], &s[0], nb)
		return r, nan != 0
	}
}

// dotFP4Of wraps a fused fp4 dot kernel over len(s) whole 32-blocks.
func dotFP4Of(k func(a *float32, w, s *byte, nb int, tab *float32) float32) func(a []float32, w, s []byte) float32 {
	return func(a []float32, w, s []byte) float32 {
		if len(s) == 0 {
			return 0
		}
		nb := len(s)
		_, _ = a[nb*32-1], w[nb*16-1]
		return k(&a[0], &w[0], &s[0], nb, &lutE2M1[0])
	}
}

var avx512Set = &kernelSet{
	level: AVX512, mr: 12, nr: 32,
	tile: func(ap, bp, c []float32, ldc, kc int) {
		_, _, _ = ap[kc*12-1], bp[kc*32-1], c[11*ldc+31]
		gemmAVX512(&ap[0], &bp[0], &c[0], ldc, kc)
	},
	dot:      dotOf(16, dotF32AVX512),
	dotFP8:   dotFP8Of(dotFP8AVX512),
	dotFP4:   dotFP4Of(dotFP4AVX512),
	dotW16:   dotW16Of(16, dotBF16AVX512),
	fp4Group: 32,
}

var avx2Set = &kernelSet{
	level: AVX2, mr: 6, nr: 16,
	tile: func(ap, bp, c []float32, ldc, kc int) {
		_, _, _ = ap[kc*6-1], bp[kc*16-1], c[5*ldc+15]
		gemmAVX2(&ap[0], &bp[0], &c[0], ldc, kc)
	},
	dot:      dotOf(8, dotF32AVX2),
	dotFP8:   dotFP8Of(dotFP8AVX2),
	dotFP4:   dotFP4Of(dotFP4AVX2),
	fp4Group: 16,
	dotW16:   dotW16Of(8, dotBF16AVX2),
	loraFP8x8: func(x []float32, w []byte, ldw int, s []byte, nb int, out []float32) bool {
		if len(out) >= 16 {
			_, _, _, _ = x[nb*32-1], w[15*ldw+nb*32-1], s[nb-1], out[15]
			return loraFP8x16AVX2(&x[0], &w[0], ldw, &s[0], nb, &out[0]) != 0
		}
		_, _, _, _ = x[nb*32-1], w[7*ldw+nb*32-1], s[nb-1], out[7]
		return loraFP8x8AVX2(&x[0], &w[0], ldw, &s[0], nb, &out[0]) != 0
	},
	qkF64: func(qT []float64, ldq int, k []float32, n int, out []float64, g int) {
		if n == 0 {
			clear(out[:4*g])
			return
		}
		_, _, _ = qT[(n-1)*ldq+4*g-1], k[n-1], out[4*g-1]
		switch g {
		case 4:
			qkF64AVX2x4(&qT[0], ldq, &k[0], n, &out[0])
		case 2:
			qkF64AVX2x2(&qT[0], ldq, &k[0], n, &out[0])
		default:
			qkF64AVX2x1(&qT[0], ldq, &k[0], n, &out[0])
		}
	},
	pack8: func(kind wkind, dst []float32, ldd int, w []byte, ldw int, s []byte, lds, nb int) {
		if nb == 0 {
			return
		}
		switch kind {
		case kindFP8:
			_, _, _ = dst[(nb*32-1)*ldd+7], w[7*ldw+nb*32-1], s[nb-1]
			packFP8x8AVX2(&dst[0], ldd, &w[0], ldw, &s[0], 0, nb, nil, nil)
		case kindFP4:
			_, _, _ = dst[(nb*32-1)*ldd+7], w[7*ldw+nb*16-1], s[7*lds+nb-1]
			packFP4x8AVX2(&dst[0], ldd, &w[0], ldw, &s[0], lds, nb, &lutE8M0[0], &pack4Consts[0])
		case kindBF16:
			_, _ = dst[(nb*8-1)*ldd+7], w[7*ldw+nb*16-1]
			packBF16x8AVX2(&dst[0], ldd, &w[0], ldw, nil, 0, nb, nil, nil)
		}
	},
	indexTerms: func(t, e, w []float32, h int) {
		if h == 0 || h%8 != 0 {
			panic("fast: indexTerms: h must be a positive multiple of 8")
		}
		nk := len(t) / h
		if nk == 0 {
			return
		}
		_, _ = e[nk*h-1], w[h-1]
		indexTermsAVX2(&t[0], &e[0], &w[0], h, nk)
	},
	qkF32Keys: func(qT []float32, ldq int, k *[8][]float32, n int, out []float32, g int) {
		nk := 8 / g
		if n == 0 {
			clear(out[:nk*8*g])
			return
		}
		_, _ = qT[(n-1)*ldq+8*g-1], out[64-1]
		for j := range nk {
			_ = k[j][n-1]
		}
		switch g {
		case 1:
			qkF32AVX2g1k8(&qT[0], ldq, &k[0][0], &k[1][0], &k[2][0], &k[3][0], &k[4][0], &k[5][0], &k[6][0], &k[7][0], n, &out[0])
		case 2:
			qkF32AVX2g2k4(&qT[0], ldq, &k[0][0], &k[1][0], &k[2][0], &k[3][0], n, &out[0])
		default:
			panic("fast: qkF32Keys: g must be 1 or 2")
		}
	},
	scaleAdd: func(acc, pv []float32, alpha float32) {
		if n := len(acc); n > 0 {
			_ = pv[n-1]
			scaleAddAVX2(&acc[0], &pv[0], n&^7, alpha)
		}
	},
	axpyF32: func(pv []float32, p *[4]float32, k *[4][]float32, nk int) {
		n := len(pv)
		if n == 0 {
			return
		}
		if n%8 != 0 {
			panic("fast: axpyF32: length not a multiple of 8")
		}
		for j := range nk {
			_ = k[j][n-1]
		}
		switch nk {
		case 1:
			axpyF32AVX2k1(&pv[0], &p[0], &k[0][0], n)
		case 4:
			axpyF32AVX2k4(&pv[0], &p[0], &k[0][0], &k[1][0], &k[2][0], &k[3][0], n)
		default:
			panic("fast: axpyF32: nk must be 1 or 4")
		}
	},
	absMaxBits: func(x []float32) uint32 { return absMaxBitsAVX2(&x[0], len(x)) },
	actQuant: func(xb []float32) bool {
		n := len(xb)
		if n == 0 || n%8 != 0 {
			return false
		}
		bits := absMaxBitsAVX2(&xb[0], n)
		if bits >= 0x7F800000 { // Inf or NaN
			return false
		}
		s := numfmt.ActQuantScale(math.Float32frombits(bits))
		if !numfmt.ActQuantFastScale(s) {
			return false
		}
		actQuantAVX2(&xb[0], n, 1/s, s)
		return true
	},
	expF32: func(dst, src []float32) bool {
		n := len(src)
		if n == 0 {
			return true
		}
		if n%4 != 0 {
			return false
		}
		_ = dst[n-1]
		return expF32AVX2(&dst[0], &src[0], n, &expConsts[0]) == 0
	},
	bf16Round: func(x []float32) {
		if len(x) > 0 {
			bf16RoundAVX2(&x[0], len(x)&^7)
		}
	},
	swigluGate: func(x, g []float32, limit float32) {
		if n := len(x) &^ 7; n > 0 {
			_ = g[n-1]
			swigluGateAVX2(&x[0], &g[0], n, limit)
		}
	},
	swigluElem: func(out, x, e, u []float32, limit, w float32) {
		if n := len(out) &^ 7; n > 0 {
			_, _, _ = x[n-1], e[n-1], u[n-1]
			swigluElemAVX2(&out[0], &x[0], &e[0], &u[0], n, limit, w)
		}
	},
	squares: func(dst, x []float32) {
		if n := len(dst); n > 0 {
			_ = x[n-1]
			squaresAVX2(&dst[0], &x[0], n&^7)
		}
	},
	addRows32: func(acc, x []float32, rows int) {
		if rows > 0 {
			_, _ = acc[31], x[rows*32-1]
			addRows32AVX2(&acc[0], &x[0], rows)
		}
	},
	rmsOut: func(out, x, w []float32, rs float32) {
		if n := len(out); n > 0 {
			_, _ = x[n-1], w[n-1]
			rmsOutAVX2(&out[0], &x[0], &w[0], n&^7, rs)
		}
	},
	hcSum4: func(out []float32, r *[4][]float32, c *[4]float32) {
		if n := len(out) &^ 7; n > 0 {
			_, _, _, _ = r[0][n-1], r[1][n-1], r[2][n-1], r[3][n-1]
			hcSum4AVX2(&out[0], &r[0][0], &r[1][0], &r[2][0], &r[3][0], n, c)
		}
	},
	sinkhorn8: func(c []float32, iters int, eps float32) {
		_ = c[127]
		sinkhornIters8AVX2(&c[0], iters, eps)
	},
	hcPost4: func(out []float32, r *[4][]float32, c *[4]float32, y []float32, p float32) {
		if n := len(out) &^ 7; n > 0 {
			_, _, _, _, _ = r[0][n-1], r[1][n-1], r[2][n-1], r[3][n-1], y[n-1]
			hcPost4AVX2(&out[0], &r[0][0], &r[1][0], &r[2][0], &r[3][0], n, c, &y[0], p)
		}
	},
	lanes4: func(x []float32, p *[3][]float32, n int, out []float32) {
		if n == 0 {
			clear(out[:12])
			return
		}
		_, _, _, _, _ = x[n-1], p[0][n*4-1], p[1][n*4-1], p[2][n*4-1], out[11]
		lanes4AVX2(&x[0], &p[0][0], &p[1][0], &p[2][0], n, &out[0])
	},
	lanes32: func(x, p []float32, n int, out []float32) {
		_, _, _ = x[n-1], p[n*32-1], out[31]
		lanes32AVX2(&x[0], &p[0], n, &out[0])
	},
	gemvFP4: func(a []float32, lda, r int, w, s []byte, nb, rows int, out []float32, ldo int) {
		if gemvEmpty(r, nb, rows, out, ldo) {
			return
		}
		_, _, _, _ = a[(r-1)*lda+nb*32-1], w[rows*nb*16-1], s[rows*nb-1], out[(r-1)*ldo+rows-1]
		switch r {
		case 1:
			gemvFP4AVX2x1(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4Consts[0])
		case 2:
			gemvFP4AVX2x2(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4Consts[0])
		case 3:
			gemvFP4AVX2x3(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4Consts[0])
		default:
			gemvFP4AVX2x4(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4Consts[0])
		}
	},
	gemvFP4Q: func(a []byte, lda, r int, w, s []byte, nb, rows int, out []float32, ldo int) {
		if gemvEmpty(r, nb, rows, out, ldo) {
			return
		}
		_, _, _, _ = a[(r-1)*lda+fp4QRowBytes(nb)-1], w[rows*nb*16-1], s[rows*nb-1], out[(r-1)*ldo+rows-1]
		for r > 0 { // (every row's arithmetic is the same whatever kernel takes it)
			k := min(r, avx2QRows)
			if k == 5 {
				k = 4
			}
			switch k {
			case 1:
				gemvFP4QAVX2x1(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4QConsts[0])
			case 2:
				gemvFP4QAVX2x2(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4QConsts[0])
			case 3:
				gemvFP4QAVX2x3(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4QConsts[0])
			case 4:
				gemvFP4QAVX2x4(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4QConsts[0])
			default:
				gemvFP4QAVX2x6(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4QConsts[0])
			}
			r -= k
			if r > 0 {
				a, out = a[k*lda:], out[k*ldo:]
			}
		}
	},
	packFP4Q: func(dst []byte, a []float32) bool {
		if len(a) < 64 {
			return true
		}
		_ = dst[fp4QRowBytes(len(a)/32)-1]
		return packFP4QAVX2(&dst[0], &a[0], len(a)/64, &fp4QShuf[0]) != 0
	},
	gemvFP8: func(a []float32, lda, r int, w []byte, f []float32, nb, rows int, out []float32, ldo int) bool {
		if rows == 0 {
			return false
		}
		_, _, _ = a[(r-1)*lda+max(nb*32, 1)-1], w[max(rows*nb*32, 1)-1], out[(r-1)*ldo+rows-1]
		if nb == 0 {
			for i := range r {
				clear(out[i*ldo : i*ldo+rows])
			}
			return false
		}
		_ = f[nb-1]
		var nan uint32
		switch r {
		case 1:
			nan = gemvFP8AVX2x1(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
		case 2:
			nan = gemvFP8AVX2x2(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
		case 3:
			nan = gemvFP8AVX2x3(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
		default:
			nan = gemvFP8AVX2x4(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
		}
		return nan != 0
	},
}

// avx2QRows is the most activation rows of one gemvFP4QAVX2 kernel (16
// vector registers).
const avx2QRows = 6

// gemvFP4QAVX512 is avx2Set.gemvFP4Q (bit for bit) by the AVX-512 kernels,
// up to gemvQRows activation rows per weight pass.
func gemvFP4QAVX512(a []byte, lda, r int, w, s []byte, nb, rows int, out []float32, ldo int) {
	if gemvEmpty(r, nb, rows, out, ldo) {
		return
	}
	_, _, _, _ = a[(r-1)*lda+fp4QRowBytes(nb)-1], w[rows*nb*16-1], s[rows*nb-1], out[(r-1)*ldo+rows-1]
	for r > 0 { // (every row's arithmetic is the same whatever kernel takes it)
		k := min(r, gemvQRows)
		c := &fp4QConsts512[0]
		switch k {
		case 1:
			gemvFP4QAVX512x1(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 2:
			gemvFP4QAVX512x2(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 3:
			gemvFP4QAVX512x3(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 4:
			gemvFP4QAVX512x4(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 5:
			gemvFP4QAVX512x5(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 6:
			gemvFP4QAVX512x6(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 7:
			gemvFP4QAVX512x7(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		default:
			gemvFP4QAVX512x8(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		}
		r -= k
		if r > 0 {
			a, out = a[k*lda:], out[k*ldo:]
		}
	}
}

// gemvFP4QVNNI is gemvFP4QAVX512 (bit for bit) on activation rows
// interleaved in pairs (pairFP4QRows), two rows a zmm: up to gemvQRows rows
// per weight pass, an odd last row by gemvFP4QAVX512x1.
func gemvFP4QVNNI(a []byte, lda, r int, w, s []byte, nb, rows int, out []float32, ldo int) {
	if gemvEmpty(r, nb, rows, out, ldo) {
		return
	}
	_, _, _, _ = a[(r-1)*lda+fp4QRowBytes(nb)-1], w[rows*nb*16-1], s[rows*nb-1], out[(r-1)*ldo+rows-1]
	if r > 1 {
		_ = a[(r&^1)*lda-1] // (the pairs span whole rows of lda bytes)
	}
	for r > 0 { // (every row's arithmetic is the same whatever kernel takes it)
		k := min(r, gemvQRows) &^ 1
		c := &fp4QConstsVNNI[0]
		switch k {
		case 0:
			gemvFP4QAVX512x1(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], &fp4QConsts512[0])
			return
		case 2:
			gemvFP4QVNNIx2(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 4:
			gemvFP4QVNNIx4(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		case 6:
			gemvFP4QVNNIx6(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		default:
			gemvFP4QVNNIx8(&a[0], lda, &w[0], &s[0], nb, rows, &out[0], ldo, &lutE8M0[0], c)
		}
		r -= k
		if r > 0 {
			a, out = a[k*lda:], out[k*ldo:]
		}
	}
}

// gemvFP8AVX512 is avx2Set.gemvFP8 (bit for bit) by the AVX-512 kernels,
// on activations permuted by permuteFP8x32Pairs.
func gemvFP8AVX512(a []float32, lda, r int, w []byte, f []float32, nb, rows int, out []float32, ldo int) bool {
	if rows == 0 {
		return false
	}
	_, _, _ = a[(r-1)*lda+max(nb*32, 1)-1], w[max(rows*nb*32, 1)-1], out[(r-1)*ldo+rows-1]
	if nb == 0 {
		for i := range r {
			clear(out[i*ldo : i*ldo+rows])
		}
		return false
	}
	_ = f[nb-1]
	var nan uint32
	switch r {
	case 1:
		nan = gemvFP8AVX512x1(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
	case 2:
		nan = gemvFP8AVX512x2(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
	case 3:
		nan = gemvFP8AVX512x3(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
	case 4:
		nan = gemvFP8AVX512x4(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
	case 8:
		nan = gemvFP8AVX512x8(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
	default: // 5–7: 4 rows, then the rest (a row's sums do not depend on the rows beside it)
		nan = gemvFP8AVX512x4(&a[0], lda, &w[0], &f[0], nb, rows, &out[0], ldo)
		if gemvFP8AVX512(a[4*lda:], lda, r-4, w, f, nb, rows, out[4*ldo:], ldo) {
			nan = 1
		}
	}
	return nan != 0
}

// dotW16RowsAVX512 is dotW16 (dotBF16AVX512 and the Go tail) of r ≤ 6
// activation rows with one weight row, bit for bit, by the multi-row
// kernels (2, 4 or 6 rows per pass; a last odd row by dotBF16AVX512).
func dotW16RowsAVX512(a []float32, lda, r int, b []byte, out []float32) {
	k := len(b) / 2
	n := k &^ 15
	_ = out[r-1]
	if r > 1 {
		_ = a[(r-1)*lda+k-1]
	}
	for i0 := 0; i0 < r; {
		g := min(r-i0, dotW16RowsMax) &^ 1
		if n == 0 || g == 0 {
			for i := i0; i < r; i++ {
				out[i] = avx512Set.dotW16(a[i*lda:i*lda+k], b)
			}
			break
		}
		ai := a[i0*lda:]
		switch g {
		case 2:
			dotBF16AVX512x2(&ai[0], lda, &b[0], n, &out[i0])
		case 4:
			dotBF16AVX512x4(&ai[0], lda, &b[0], n, &out[i0])
		default:
			dotBF16AVX512x6(&ai[0], lda, &b[0], n, &out[i0])
		}
		for i := i0; i < i0+g; i++ {
			out[i] += dotGoBF16(a[i*lda+n:i*lda+k], b[2*n:])
		}
		i0 += g
	}
}

// expConsts are the constants of expF32AVX2, each repeated in 4 lanes: those
// of math/exp_amd64.s (log2 e, ln 2 in two parts, 1/16, the Taylor
// coefficients, 0.5, 1, 2), the argument limits ±700 and the exponent bias
// 1023 as int64.
var expConsts [16 * 4]float64

func init() {
	vals := []float64{
		1.4426950408889634073599246810018920,                  // log2 e
		0.69314718055966295651160180568695068359375,           // ln 2, upper part
		0.28235290563031577122588448175013436025525412068e-12, // ln 2, lower part
		0.0625,
		2.4801587301587301587e-5, 1.9841269841269841270e-4, 1.3888888888888888889e-3,
		8.3333333333333333333e-3, 4.1666666666666666667e-2, 1.6666666666666666667e-1,
		0.5, 1.0, 2.0,
		700, -700,
		math.Float64frombits(1023),
	}
	for i, v := range vals {
		for l := range 4 {
			expConsts[4*i+l] = v
		}
	}
}

// pack4Consts are the constants of packFP4x8AVX2: the e2m1 magnitudes of
// codes 0..7 and the nibble shifts 0, 4, …, 28.
var pack4Consts [16]float32

func init() {
	copy(pack4Consts[:8], lutE2M1[:8])
	for i := range 8 {
		pack4Consts[8+i] = math.Float32frombits(uint32(4 * i))
	}
}

// The AVX2 kernels whose results do not depend on the level's dot order
// (bit-identical to the reference kernels, or their own summation order)
// serve the AVX-512 level too.
func init() {
	avx512Set.gemvFP4 = avx2Set.gemvFP4
	avx512Set.packFP4Q = avx2Set.packFP4Q
	avx512Set.gemvFP4Q = avx2Set.gemvFP4Q
	avx512Set.gemvFP8 = avx2Set.gemvFP8
	avx512Set.pack8 = avx2Set.pack8
	avx512Set.lanes32 = avx2Set.lanes32
	avx512Set.loraFP8x8 = avx2Set.loraFP8x8
	avx512Set.qkF64 = avx2Set.qkF64
	avx512Set.actQuant = avx2Set.actQuant
	avx512Set.absMaxBits = avx2Set.absMaxBits
	avx512Set.lanes4 = avx2Set.lanes4
	avx512Set.expF32 = avx2Set.expF32
	avx512Set.qkF32Keys = avx2Set.qkF32Keys
	avx512Set.indexTerms = avx2Set.indexTerms
	// the attention's P·V on 16 lanes: each element's FMAs as the AVX2
	// kernel's, so the same bits
	avx512Set.axpyF32 = func(pv []float32, p *[4]float32, k *[4][]float32, nk int) {
		n := len(pv)
		if n == 0 {
			return
		}
		if n%8 != 0 {
			panic("fast: axpyF32: length not a multiple of 8")
		}
		for j := range nk {
			_ = k[j][n-1]
		}
		switch nk {
		case 1:
			axpyF32AVX512k1(&pv[0], &p[0], &k[0][0], n)
		case 4:
			axpyF32AVX512k4(&pv[0], &p[0], &k[0][0], &k[1][0], &k[2][0], &k[3][0], n)
		default:
			panic("fast: axpyF32: nk must be 1 or 4")
		}
	}
	avx512Set.qkF32K8 = func(qT []float32, ldq int, k *[8][]float32, n int, out []float32) {
		if n == 0 {
			clear(out[:128])
			return
		}
		_, _ = qT[(n-1)*ldq+16-1], out[128-1]
		for j := range 8 {
			_ = k[j][n-1]
		}
		qkF32AVX512h16k8(&qT[0], ldq, &k[0][0], &k[1][0], &k[2][0], &k[3][0], &k[4][0], &k[5][0], &k[6][0], &k[7][0], n, &out[0])
	}
	avx512Set.axpyHeads = func(pv []float32, d int, p []float32, hs []int32, k *[4][]float32) {
		if len(hs) == 0 || d == 0 {
			return
		}
		if d%64 != 0 {
			panic("fast: axpyHeads: d not a multiple of 64")
		}
		for _, hh := range hs {
			_, _ = pv[int(hh)*d+d-1], p[4*int(hh)+3]
		}
		for j := range 4 {
			_ = k[j][d-1]
		}
		axpyHeadsF32AVX512k4(&pv[0], d, &p[0], &hs[0], len(hs), &k[0][0], &k[1][0], &k[2][0], &k[3][0], d)
	}
	avx512Set.scaleAdd = avx2Set.scaleAdd
	avx512Set.bf16Round = avx2Set.bf16Round
	avx512Set.swigluGate = avx2Set.swigluGate
	avx512Set.swigluElem = avx2Set.swigluElem
	avx512Set.squares = avx2Set.squares
	avx512Set.addRows32 = avx2Set.addRows32
	avx512Set.rmsOut = avx2Set.rmsOut
	avx512Set.hcSum4 = avx2Set.hcSum4
	avx512Set.hcPost4 = avx2Set.hcPost4
	avx512Set.sinkhorn8 = avx2Set.sinkhorn8
	// the AVX-512 decode kernels need BW and VL (byte and word ops, EVEX
	// ymm), the fp4 one VBMI (VPERMB); they give the AVX2 kernels' results,
	// so a CPU without these keeps the AVX2 ones
	if cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL {
		avx512Set.gemvFP8, avx512Set.fp8Pairs, avx512Set.fp8Rows = gemvFP8AVX512, true, 8
		avx512Set.dotW16Rows = dotW16RowsAVX512
		if cpu.X86.HasAVX512VBMI {
			avx512Set.gemvFP4Q = gemvFP4QAVX512
			if cpu.X86.HasAVX512VNNI {
				avx512Set.gemvFP4Q, avx512Set.fp4QPairs = gemvFP4QVNNI, true
			}
		}
	}
}
