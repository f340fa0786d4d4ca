package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// pfDist is how far ahead (bytes) the streaming kernels prefetch weights;
// 0 leaves it to the hardware prefetchers.
var pfDist = 2048

// bf16RowsPfDist is the prefetch distance (bytes) of dotBF16RowsAVX512.
var bf16RowsPfDist = 8192

// prefetch emits the software prefetch of the weight stream at base.
func prefetch(base reg.Register) {
	if pfDist > 0 {
		PREFETCHT0(Mem{Base: base, Disp: pfDist})
	}
}

func main() {
	gemm("gemmAVX512", 12, 2, 64, true)
	gemm("gemmAVX2", 6, 2, 32, false)
	dotF32("dotF32AVX512", 64, true)
	dotF32("dotF32AVX2", 32, false)
	dotFP8AVX512()
	dotFP8AVX2()
	dotFP4AVX512()
	dotFP4AVX2()
	dotBF16AVX2()
	dotBF16AVX512()
	lanes32AVX2()
	loraFP8AVX2(1)
	loraFP8AVX2(2)
	qkF64AVX2(1)
	qkF64AVX2(2)
	for _, kind := range []string{"FP8", "FP4", "BF16"} {
		pack8AVX2(kind)
	}
	qkF64AVX2(4)
	absMaxBitsAVX2()
	actQuantAVX2()
	lanes4AVX2()
	expF32AVX2()
	for r := 1; r <= 4; r++ {
		gemvFP4AVX2(r)
		gemvFP8AVX2(r)
		gemvFP4QAVX2(r)
	}
	packFP4QAVX2()
	gemvFP4QAVX2(6) // (8 rows would need more than 16 vector registers)
	for r := 1; r <= 8; r++ {
		gemvFP4QAVX512(r)
	}
	for r := 1; r <= 4; r++ {
		gemvFP8AVX512(r)
	}
	gemvFP8AVX512(8)
	for r := 2; r <= 6; r += 2 {
		dotBF16RowsAVX512(r)
	}
	qkF32KeysAVX2(1, 8)
	qkF32KeysAVX2(2, 4)
	axpyF32AVX2(1)
	axpyF32AVX2(4)
	axpyF32AVX512(1)
	axpyF32AVX512(4)
	axpyHeadsF32AVX512()
	qkF32AVX512k8()
	bf16RoundAVX2()
	swigluGateAVX2()
	swigluElemAVX2()
	squaresAVX2()
	addRows32AVX2()
	rmsOutAVX2()
	hcSum4AVX2(false)
	sinkhornIters8AVX2()
	hcSum4AVX2(true)
	scaleAddAVX2()
	indexTermsAVX2()
	for r := 2; r <= 8; r += 2 {
		gemvFP4QVNNI(r)
	}
	Generate()
}

func zero(r reg.VecVirtual, avx512 bool) {
	if avx512 {
		VPXORD(r, r, r)
	} else {
		VXORPS(r, r, r)
	}
}

func vec(avx512 bool) reg.VecVirtual {
	if avx512 {
		return ZMM()
	}
	return YMM()
}

// gemm emits the register-blocked micro-kernel: mr rows broadcast from the
// packed A panel, nv vectors of width vb bytes from the packed B panel.
func gemm(name string, mr, nv, vb int, avx512 bool) {
	TEXT(name, NOSPLIT, "func(ap, bp, c *float32, ldc, kc int)")
	Doc(fmt.Sprintf("%s accumulates a %d×%d f32 tile: C += Apᵀ·Bp over kc steps.", name, mr, nv*vb/4))
	ap := Load(Param("ap"), GP64())
	bp := Load(Param("bp"), GP64())
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	kc := Load(Param("kc"), GP64())
	SHLQ(Imm(2), ldc)
	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nv)
		for v := range acc[i] {
			acc[i][v] = vec(avx512)
			zero(acc[i][v], avx512)
		}
	}
	b := make([]reg.VecVirtual, nv)
	for v := range b {
		b[v] = vec(avx512)
	}
	var bc reg.VecVirtual
	if !avx512 {
		bc = vec(false)
	}
	// one k step at byte offsets (ao, bo) from ap, bp
	step := func(ao, bo int) {
		for v := range b {
			VMOVUPS(Mem{Base: bp, Disp: bo + v*vb}, b[v])
		}
		for i := 0; i < mr; i++ {
			m := Mem{Base: ap, Disp: ao + 4*i}
			if avx512 {
				for v := range b {
					VFMADD231PS_BCST(m, b[v], acc[i][v])
				}
			} else {
				VBROADCASTSS(m, bc)
				for v := range b {
					VFMADD231PS(bc, b[v], acc[i][v])
				}
			}
		}
	}
	// four steps per iteration, then the rest one at a time
	k4 := GP64()
	MOVQ(kc, k4)
	SHRQ(Imm(2), k4)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop4")
	for u := 0; u < 4; u++ {
		step(u*4*mr, u*nv*vb)
	}
	ADDQ(U32(4*4*mr), ap)
	ADDQ(U32(4*nv*vb), bp)
	DECQ(k4)
	JNZ(LabelRef(name + "_loop4"))
	Label(name + "_tail")
	ANDQ(Imm(3), kc)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	step(0, 0)
	ADDQ(U32(4*mr), ap)
	ADDQ(U32(nv*vb), bp)
	DECQ(kc)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			m := Mem{Base: c, Disp: v * vb}
			VADDPS(m, acc[i][v], acc[i][v])
			VMOVUPS(acc[i][v], m)
		}
		if i+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// hsum reduces the vector x (zmm or ymm) to a float32 in the low lane of an
// xmm register and stores it as the return value "ret".
func hsum(x reg.VecVirtual, avx512 bool, ret string) {
	y := YMM()
	if avx512 {
		VEXTRACTF64X4(Imm(1), x, y)
		VADDPS(x.AsY(), y, y)
	} else {
		y = x
	}
	xl := XMM()
	VEXTRACTF128(Imm(1), y, xl)
	VADDPS(y.AsX(), xl, xl)
	t := XMM()
	VMOVHLPS(xl, xl, t)
	VADDPS(t, xl, xl)
	VMOVSHDUP(xl, t)
	VADDSS(t, xl, xl)
	Store(xl, ReturnIndex(0))
}

func dotF32(name string, vb int, avx512 bool) {
	TEXT(name, NOSPLIT, "func(a, b *float32, n int) float32")
	Doc(name + " returns Σ a[i]·b[i]; n must be a multiple of the vector width.")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	w := vb / 4
	acc := make([]reg.VecVirtual, 4)
	for i := range acc {
		acc[i] = vec(avx512)
		zero(acc[i], avx512)
	}
	t := vec(avx512)
	CMPQ(n, U32(4*w))
	JL(LabelRef(name + "_one"))
	Label(name + "_four")
	for i := range acc {
		VMOVUPS(Mem{Base: a, Disp: i * vb}, t)
		VFMADD231PS(Mem{Base: b, Disp: i * vb}, t, acc[i])
	}
	ADDQ(U32(4*vb), a)
	ADDQ(U32(4*vb), b)
	SUBQ(U32(4*w), n)
	CMPQ(n, U32(4*w))
	JGE(LabelRef(name + "_four"))
	Label(name + "_one")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	VMOVUPS(Mem{Base: a}, t)
	VFMADD231PS(Mem{Base: b}, t, acc[0])
	ADDQ(U32(vb), a)
	ADDQ(U32(vb), b)
	SUBQ(U32(w), n)
	JMP(LabelRef(name + "_one"))
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	hsum(acc[0], avx512, "")
	VZEROUPPER()
	RET()
}

// scaleFactor loads scale byte (s) and broadcasts the float whose bits are
// (byte+bias)<<23 into f.
func scaleFactor(s reg.Register, bias int, f reg.VecVirtual, avx512 bool) {
	r := GP32()
	MOVBLZX(Mem{Base: s}, r)
	if bias != 0 {
		ADDL(Imm(uint64(bias)), r)
	}
	SHLL(Imm(23), r)
	if avx512 {
		VPBROADCASTD(r, f)
	} else {
		x := XMM()
		VMOVD(r, x)
		VPBROADCASTD(x, f)
	}
}

func constVec(v uint32, avx512 bool) reg.VecVirtual {
	r := GP32()
	MOVL(U32(v), r)
	x := vec(avx512)
	if avx512 {
		VPBROADCASTD(r, x)
	} else {
		t := XMM()
		VMOVD(r, t)
		VPBROADCASTD(t, x)
	}
	return x
}

// fp8Convert turns sign-extended e4m3 codes (one per dword) into the f32 bit
// pattern of e4m3·2^-120 (exact, subnormals included): bits 0..6 move to
// 20..26 and the sign to 31.
func dotFP8AVX512() {
	name := "dotFP8AVX512"
	TEXT(name, NOSPLIT, "func(a *float32, w, s *byte, nb int) (sum float32, nan uint32)")
	Doc(name + " returns Σ_blocks e8m0(s)·Σ a·e4m3(w) over nb 32-blocks.")
	a := Load(Param("a"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	nb := Load(Param("nb"), GP64())
	mask := constVec(0x87F00000, true)
	b7f := constVec(0x7F7F7F7F, false)
	flag := YMM()
	VPXOR(flag, flag, flag)
	acc := []reg.VecVirtual{ZMM(), ZMM()}
	for _, r := range acc {
		zero(r, r.Size() == 64)
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	f := ZMM()
	scaleFactor(s, 120, f, true)
	nt := YMM()
	VPAND(Mem{Base: w}, b7f, nt)
	VPCMPEQB(b7f, nt, nt)
	VPOR(nt, flag, flag)
	p := ZMM()
	for h := 0; h < 2; h++ {
		x := ZMM()
		VPMOVSXBD(Mem{Base: w, Disp: 16 * h}, x)
		VPSLLD(Imm(20), x, x)
		VPANDD(mask, x, x)
		if h == 0 {
			VMULPS(Mem{Base: a}, x, p)
		} else {
			VFMADD231PS(Mem{Base: a, Disp: 64}, x, p)
		}
	}
	VFMADD231PS(f, p, acc[0])
	ADDQ(Imm(128), a)
	ADDQ(Imm(32), w)
	INCQ(s)
	DECQ(nb)
	JZ(LabelRef(name + "_done"))
	// second block into the other accumulator (two chains)
	f2 := ZMM()
	scaleFactor(s, 120, f2, true)
	nt2 := YMM()
	VPAND(Mem{Base: w}, b7f, nt2)
	VPCMPEQB(b7f, nt2, nt2)
	VPOR(nt2, flag, flag)
	p2 := ZMM()
	for h := 0; h < 2; h++ {
		x := ZMM()
		VPMOVSXBD(Mem{Base: w, Disp: 16 * h}, x)
		VPSLLD(Imm(20), x, x)
		VPANDD(mask, x, x)
		if h == 0 {
			VMULPS(Mem{Base: a}, x, p2)
		} else {
			VFMADD231PS(Mem{Base: a, Disp: 64}, x, p2)
		}
	}
	VFMADD231PS(f2, p2, acc[1])
	ADDQ(Imm(128), a)
	ADDQ(Imm(32), w)
	INCQ(s)
	DECQ(nb)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	hsum(acc[0], true, "")
	r := GP32()
	VPMOVMSKB(flag, r)
	Store(r, ReturnIndex(1))
	VZEROUPPER()
	RET()
}

func dotFP8AVX2() {
	name := "dotFP8AVX2"
	TEXT(name, NOSPLIT, "func(a *float32, w, s *byte, nb int) (sum float32, nan uint32)")
	Doc(name + " returns Σ_blocks e8m0(s)·Σ a·e4m3(w) over nb 32-blocks.")
	a := Load(Param("a"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	nb := Load(Param("nb"), GP64())
	mask := constVec(0x87F00000, false)
	b7f := constVec(0x7F7F7F7F, false)
	flag := YMM()
	VPXOR(flag, flag, flag)
	acc := []reg.VecVirtual{YMM(), YMM()}
	for _, r := range acc {
		zero(r, r.Size() == 64)
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for blk := 0; blk < 2; blk++ {
		f := YMM()
		scaleFactor(s, 120, f, false)
		nt := YMM()
		VPAND(Mem{Base: w}, b7f, nt)
		VPCMPEQB(b7f, nt, nt)
		VPOR(nt, flag, flag)
		p := []reg.VecVirtual{YMM(), YMM()}
		for q := 0; q < 4; q++ {
			x := YMM()
			VPMOVSXBD(Mem{Base: w, Disp: 8 * q}, x)
			VPSLLD(Imm(20), x, x)
			VPAND(mask, x, x)
			if q < 2 {
				VMULPS(Mem{Base: a, Disp: 32 * q}, x, p[q])
			} else {
				VFMADD231PS(Mem{Base: a, Disp: 32 * q}, x, p[q-2])
			}
		}
		VADDPS(p[1], p[0], p[0])
		VFMADD231PS(f, p[0], acc[blk])
		ADDQ(Imm(128), a)
		ADDQ(Imm(32), w)
		INCQ(s)
		DECQ(nb)
		if blk == 0 {
			JZ(LabelRef(name + "_done"))
		} else {
			JNZ(LabelRef(name + "_loop"))
		}
	}
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	hsum(acc[0], false, "")
	r := GP32()
	VPMOVMSKB(flag, r)
	Store(r, ReturnIndex(1))
	VZEROUPPER()
	RET()
}

func dotFP4AVX512() {
	name := "dotFP4AVX512"
	TEXT(name, NOSPLIT, "func(a *float32, w, s *byte, nb int, tab *float32) float32")
	Doc(name + " returns Σ_blocks e8m0(s)·Σ a·e2m1(w) over nb 32-blocks (a permuted).")
	a := Load(Param("a"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	nb := Load(Param("nb"), GP64())
	tp := Load(Param("tab"), GP64())
	tab := ZMM()
	VMOVUPS(Mem{Base: tp}, tab)
	acc := []reg.VecVirtual{ZMM(), ZMM()}
	for _, r := range acc {
		zero(r, r.Size() == 64)
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for blk := 0; blk < 2; blk++ {
		f := ZMM()
		scaleFactor(s, 0, f, true)
		x, lo, hi, p := ZMM(), ZMM(), ZMM(), ZMM()
		VPMOVZXBD(Mem{Base: w}, x)
		VPERMPS(tab, x, lo)
		VPSRLD(Imm(4), x, x)
		VPERMPS(tab, x, hi)
		VMULPS(Mem{Base: a}, lo, p)
		VFMADD231PS(Mem{Base: a, Disp: 64}, hi, p)
		VFMADD231PS(f, p, acc[blk])
		ADDQ(Imm(128), a)
		ADDQ(Imm(16), w)
		INCQ(s)
		DECQ(nb)
		if blk == 0 {
			JZ(LabelRef(name + "_done"))
		} else {
			JNZ(LabelRef(name + "_loop"))
		}
	}
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	hsum(acc[0], true, "")
	VZEROUPPER()
	RET()
}

func dotFP4AVX2() {
	name := "dotFP4AVX2"
	TEXT(name, NOSPLIT, "func(a *float32, w, s *byte, nb int, tab *float32) float32")
	Doc(name + " returns Σ_blocks e8m0(s)·Σ a·e2m1(w) over nb 32-blocks (a permuted).")
	a := Load(Param("a"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	nb := Load(Param("nb"), GP64())
	tp := Load(Param("tab"), GP64())
	tab := YMM()
	VMOVUPS(Mem{Base: tp}, tab)
	sign := constVec(0x80000000, false)
	acc := []reg.VecVirtual{YMM(), YMM()}
	for _, r := range acc {
		zero(r, r.Size() == 64)
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for blk := 0; blk < 2; blk++ {
		f := YMM()
		scaleFactor(s, 0, f, false)
		p := []reg.VecVirtual{YMM(), YMM()}
		for q := 0; q < 2; q++ {
			x, lo, hi, t := YMM(), YMM(), YMM(), YMM()
			VPMOVZXBD(Mem{Base: w, Disp: 8 * q}, x)
			VPERMPS(tab, x, lo)
			VPSLLD(Imm(28), x, t)
			VPAND(sign, t, t)
			VXORPS(t, lo, lo)
			VPSLLD(Imm(24), x, t)
			VPAND(sign, t, t)
			VPSRLD(Imm(4), x, x)
			VPERMPS(tab, x, hi)
			VXORPS(t, hi, hi)
			VMULPS(Mem{Base: a, Disp: 64 * q}, lo, p[q])
			VFMADD231PS(Mem{Base: a, Disp: 64*q + 32}, hi, p[q])
		}
		VADDPS(p[1], p[0], p[0])
		VFMADD231PS(f, p[0], acc[blk])
		ADDQ(Imm(128), a)
		ADDQ(Imm(16), w)
		INCQ(s)
		DECQ(nb)
		if blk == 0 {
			JZ(LabelRef(name + "_done"))
		} else {
			JNZ(LabelRef(name + "_loop"))
		}
	}
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	hsum(acc[0], false, "")
	VZEROUPPER()
	RET()
}

// gemvFP4AVX2 emits gemvFP4AVX2x<r>: r activation rows (stride lda floats,
// permuted per 64-element chunk, see permuteFP4x64) against rows
// consecutive fp4 weight rows of nb 32-blocks each (nb even; codes and
// scales contiguous). Two blocks (32 bytes) are dequantised once per
// iteration by nibble → bf16 byte tables (VPSHUFB) widened to f32 by
// interleaving (exact) and FMA'd into per-block partials of every
// activation row; lanes 0..3 of every vector hold the first block, 4..7 the
// second, and the partials are scaled by the two blocks' e8m0 factors
// (looked up in sc). out[i*ldo+j] receives the sum of activation row i and
// weight row j. c points to 4 32-byte constants: the bf16 low-byte table,
// the high-byte table, 0x0F bytes and the 0xFFFF0000 dword mask.
func gemvFP4AVX2(r int) {
	name := fmt.Sprintf("gemvFP4AVX2x%d", r)
	TEXT(name, NOSPLIT, "func(a *float32, lda int, w, s *byte, nb, rows int, out *float32, ldo int, sc *float32, c *byte)")
	Doc(fmt.Sprintf("%s computes out[i*ldo+j] = Σ_blocks e8m0(s_j)·Σ a_i·e2m1(w_j) for %d activation rows a_i = a[i*lda:] (permuted) and rows weight rows, nb even.", name, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	rows := Load(Param("rows"), GP64())
	o := Load(Param("out"), GP64())
	sc := Load(Param("sc"), GP64())
	cp := Load(Param("c"), GP64())
	SHLQ(Imm(2), lda)
	tabL, tabH := YMM(), YMM()
	VMOVDQU(Mem{Base: cp}, tabL)
	VMOVDQU(Mem{Base: cp, Disp: 32}, tabH)
	m0f := Mem{Base: cp, Disp: 64}
	mhi := Mem{Base: cp, Disp: 96}
	ac := GP64()
	rowMem := activationRows(ac, lda, r)
	chains := 1
	if r <= 2 {
		chains = 2
	}
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Label(name + "_row")
	MOVQ(a, ac)
	nb := Load(Param("nb"), GP64())
	acc := make([][]reg.VecVirtual, r)
	for i := range acc {
		for range chains {
			x := YMM()
			VXORPS(x, x, x)
			acc[i] = append(acc[i], x)
		}
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	prefetch(w)
	p := make([][]reg.VecVirtual, r)
	for i := range p {
		for range chains {
			p[i] = append(p[i], YMM())
		}
	}
	x := YMM()
	VMOVDQU(Mem{Base: w}, x)
	v := 0
	for half := 0; half < 2; half++ {
		nib := YMM()
		if half == 0 {
			VPAND(m0f, x, nib)
		} else {
			VPSRLW(Imm(4), x, nib)
			VPAND(m0f, nib, nib)
		}
		lo, hi := YMM(), YMM()
		VPSHUFB(nib, tabL, lo)
		VPSHUFB(nib, tabH, hi)
		wb := []reg.VecVirtual{YMM(), YMM()}
		VPUNPCKLBW(hi, lo, wb[0])
		VPUNPCKHBW(hi, lo, wb[1])
		for _, b := range wb {
			for q := 0; q < 2; q++ {
				f := YMM()
				if q == 0 {
					VPSLLD(Imm(16), b, f)
				} else {
					VPAND(mhi, b, f)
				}
				ch := v % chains
				for i := 0; i < r; i++ {
					if v < chains {
						VMULPS(rowMem(i, 32*v), f, p[i][ch])
					} else {
						VFMADD231PS(rowMem(i, 32*v), f, p[i][ch])
					}
				}
				v++
			}
		}
	}
	f := fp4PairFactors(s, sc)
	for i := 0; i < r; i++ {
		for ch := 0; ch < chains; ch++ {
			VFMADD231PS(f, p[i][ch], acc[i][ch])
		}
	}
	ADDQ(U32(256), ac)
	fp4GemvLoopEnd(name, w, s, nb, o, rows, acc)
}

// gemvFP4QAVX2 emits gemvFP4QAVX2x<r>, the fp4 GEMV on activations held as
// 16-bit integers (see packFP4Q): r activation rows (stride lda bytes, 160
// bytes per 64-element chunk: four vectors of int16 in the order the
// weights are decoded, then 8 float32 chunk factors, 4 per block) against
// rows consecutive fp4 weight rows of nb 32-blocks each (nb even).
//
// Per chunk (32 bytes of codes = two blocks, one per 128-bit lane) the
// nibbles become int8 values 2·e2m1 by one VPSHUFB table each; a shift left
// by 8 and a mask of the high bytes give four vectors of 16-bit words
// 256·2·e2m1 (exact). VPMADDWD against the activation words sums the
// products in pairs exactly in 32 bits; the four results are added (at
// most 8 products of |x| < 2^15 and |w| ≤ 3072 per dword: < 2^30), converted
// to float32 and scaled by the chunk factors of the activation row and the
// e8m0 factors of the two blocks (looked up in sc). This is 4 VPMADDWD per
// 64 weights and activation row instead of 8 FMAs and 8 widening ops.
// out[i*ldo+j] receives the sum of activation row i and weight row j. c
// points to 3 32-byte constants: the int8 table of 2·e2m1, 0x0F bytes and
// 0xFF00 words.
func gemvFP4QAVX2(r int) {
	name := fmt.Sprintf("gemvFP4QAVX2x%d", r)
	TEXT(name, NOSPLIT, "func(a *byte, lda int, w, s *byte, nb, rows int, out *float32, ldo int, sc *float32, c *byte)")
	Doc(fmt.Sprintf("%s computes out[i*ldo+j] = Σ_blocks e8m0(s_j)·Σ a_i·e2m1(w_j) for %d packed int16 activation rows a_i = a[i*lda:] and rows weight rows, nb even.", name, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	rows := Load(Param("rows"), GP64())
	o := Load(Param("out"), GP64())
	sc := Load(Param("sc"), GP64())
	cp := Load(Param("c"), GP64())
	tab := YMM()
	VMOVDQU(Mem{Base: cp}, tab)
	m0f := Mem{Base: cp, Disp: 32}
	mhi := Mem{Base: cp, Disp: 64}
	ac := GP64()
	lo4 := min(r, 4)
	rowMemLo := activationRows(ac, lda, lo4)
	var ac4 reg.GPVirtual
	var rowMemHi func(i, disp int) Mem
	if r > 4 {
		ac4 = GP64()
		rowMemHi = activationRows(ac4, lda, r-4)
	}
	rowMem := func(i, disp int) Mem {
		if i < 4 {
			return rowMemLo(i, disp)
		}
		return rowMemHi(i-4, disp)
	}
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Label(name + "_row")
	MOVQ(a, ac)
	if r > 4 {
		LEAQ(Mem{Base: a, Index: lda, Scale: 4}, ac4)
	}
	nb := Load(Param("nb"), GP64())
	acc := make([][]reg.VecVirtual, r)
	for i := range acc {
		x := YMM()
		VXORPS(x, x, x)
		acc[i] = []reg.VecVirtual{x}
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	prefetch(w)
	x := YMM()
	VMOVDQU(Mem{Base: w}, x)
	lo, hi := YMM(), YMM()
	VPSRLW(Imm(4), x, hi)
	VPAND(m0f, x, lo)
	VPAND(m0f, hi, hi)
	VPSHUFB(lo, tab, lo)
	VPSHUFB(hi, tab, hi)
	// words: v0 = elements 4i, v1 = 4i+2 (from the low nibbles), v2 = 4i+1,
	// v3 = 4i+3 (high nibbles), i < 8 per lane, each times 256
	wv := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	VPSLLW(Imm(8), lo, wv[0])
	VPAND(mhi, lo, wv[1])
	VPSLLW(Imm(8), hi, wv[2])
	VPAND(mhi, hi, wv[3])
	f := fp4PairFactors(s, sc)
	for i := 0; i < r; i++ {
		p := []reg.VecVirtual{YMM(), YMM()}
		for v := range wv {
			if v < 2 {
				VPMADDWD(rowMem(i, 32*v), wv[v], p[v])
			} else {
				t := YMM()
				VPMADDWD(rowMem(i, 32*v), wv[v], t)
				VPADDD(t, p[v-2], p[v-2])
			}
		}
		VPADDD(p[1], p[0], p[0])
		VCVTDQ2PS(p[0], p[0])
		VMULPS(rowMem(i, 128), p[0], p[0])
		VFMADD231PS(f, p[0], acc[i][0])
	}
	ADDQ(U32(160), ac)
	if r > 4 {
		ADDQ(U32(160), ac4)
	}
	fp4GemvLoopEnd(name, w, s, nb, o, rows, acc)
}

// gemvFP4QAVX512 emits gemvFP4QAVX512x<r>, gemvFP4QAVX2x<r> with 512-bit
// integer work (up to 8 rows: 32 vector registers) and the same result bit
// for bit: the same 8 dword sums per chunk (integer sums are exact, so
// their order is free) and the same float steps (conversion, chunk factor,
// one FMA into the row's 8-lane accumulator per chunk, storeSum).
//
// The chunk's 32 code bytes are broadcast to both halves of a zmm; one
// VPSHUFB places code byte 2i (low 256 bits) or 2i+1 (high 256 bits) of
// each 128-bit lane as the high byte of word i, the low byte zero (0x80
// control bytes); a VPERMB (AVX-512 VBMI) of the 64-entry table
// tab[b] = 2·e2m1(b & 15) then gives the words 256·2·e2m1 of the low
// nibbles, [v0 | v1], and after VPSRLW 4 those of the high nibbles,
// [v2 | v3] (each low byte indexes a multiple of 16: tab[0] = 0): the two
// 64-byte halves of the chunk's activation words, two VPMADDWD of 64 bytes
// per chunk and row instead of four of 32. The halves of the sum are added
// before the conversion. c points to 2 64-byte constants: the table and the
// VPSHUFB control.
func gemvFP4QAVX512(r int) {
	name := fmt.Sprintf("gemvFP4QAVX512x%d", r)
	TEXT(name, NOSPLIT, "func(a *byte, lda int, w, s *byte, nb, rows int, out *float32, ldo int, sc *float32, c *byte)")
	Doc(fmt.Sprintf("%s is gemvFP4QAVX2x%d (the same result bit for bit) with 512-bit integer work, %d packed int16 activation rows.", name, r, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	rows := Load(Param("rows"), GP64())
	o := Load(Param("out"), GP64())
	sc := Load(Param("sc"), GP64())
	cp := Load(Param("c"), GP64())
	tab, ctl := ZMM(), ZMM()
	VMOVDQU64(Mem{Base: cp}, tab)
	VMOVDQU64(Mem{Base: cp, Disp: 64}, ctl)
	ac := GP64()
	lo4 := min(r, 4)
	rowMemLo := activationRows(ac, lda, lo4)
	var ac4 reg.GPVirtual
	var rowMemHi func(i, disp int) Mem
	if r > 4 {
		ac4 = GP64()
		rowMemHi = activationRows(ac4, lda, r-4)
	}
	rowMem := func(i, disp int) Mem {
		if i < 4 {
			return rowMemLo(i, disp)
		}
		return rowMemHi(i-4, disp)
	}
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Label(name + "_row")
	MOVQ(a, ac)
	if r > 4 {
		LEAQ(Mem{Base: a, Index: lda, Scale: 4}, ac4)
	}
	nb := Load(Param("nb"), GP64())
	acc := make([][]reg.VecVirtual, r)
	for i := range acc {
		x := YMM()
		VXORPS(x, x, x)
		acc[i] = []reg.VecVirtual{x}
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for u := 0; u < 2; u++ {
		if u == 0 {
			prefetch(w)
		}
		x := ZMM()
		VBROADCASTI64X4(Mem{Base: w}, x)
		lo, hi := ZMM(), ZMM()
		VPSHUFB(ctl, x, x)   // words [0, code byte]
		VPERMB(tab, x, lo)   // [v0 | v1]: tab[low nibble] in the high bytes, tab[0] = 0 in the low
		VPSRLW(Imm(4), x, x) // high byte: the high nibble; low byte: (low nibble)<<4, whose index has 0 in bits 0..3
		VPERMB(tab, x, hi)   // [v2 | v3]
		f := fp4PairFactors(s, sc)
		for i := 0; i < r; i++ {
			p, q := ZMM(), ZMM()
			VPMADDWD(rowMem(i, 0), lo, p)
			VPMADDWD(rowMem(i, 64), hi, q)
			VPADDD(q, p, p)
			y := YMM()
			VEXTRACTI64X4(Imm(1), p, y)
			VPADDD(y, p.AsY(), y)
			VCVTDQ2PS(y, y)
			VMULPS(rowMem(i, 128), y, y)
			VFMADD231PS(f, y, acc[i][0])
		}
		ADDQ(U32(160), ac)
		if r > 4 {
			ADDQ(U32(160), ac4)
		}
		ADDQ(Imm(32), w)
		ADDQ(Imm(2), s)
		SUBQ(Imm(2), nb)
		if u == 0 {
			JZ(LabelRef(name + "_done"))
		} else {
			JNZ(LabelRef(name + "_loop"))
		}
	}
	Label(name + "_done")
	storeRowSums(acc, o)
	ADDQ(Imm(4), o)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fp4PairFactors loads the e8m0 factors of the two blocks whose scale bytes
// are at s from the table sc: lanes 0..3 the first, 4..7 the second.
func fp4PairFactors(s, sc reg.Register) reg.VecVirtual {
	f, f1 := YMM(), YMM()
	s0, s1 := GP64(), GP64()
	MOVBQZX(Mem{Base: s}, s0)
	MOVBQZX(Mem{Base: s, Disp: 1}, s1)
	VBROADCASTSS(Mem{Base: sc, Index: s0, Scale: 4}, f)
	VBROADCASTSS(Mem{Base: sc, Index: s1, Scale: 4}, f1)
	VBLENDPS(Imm(0xF0), f1, f, f)
	return f
}

// fp4GemvLoopEnd closes the two fp4 GEMV generators' loops: the next two
// blocks (32 code bytes, 2 scale bytes), then per weight row the row sums
// (storeRowSums) and the next row.
func fp4GemvLoopEnd(name string, w, s, nb, o, rows reg.Register, acc [][]reg.VecVirtual) {
	ADDQ(Imm(32), w)
	ADDQ(Imm(2), s)
	SUBQ(Imm(2), nb)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	storeRowSums(acc, o)
	ADDQ(Imm(4), o)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// packFP4QAVX2 emits packFP4QAVX2, packFP4Q in vectors: per 32-block the
// largest magnitude (integer max of the bit patterns, which also flags Inf
// and NaN), the factors from its exponent, VCVTPS2DQ of x·2^k (round to
// nearest even), VPACKSSDW (saturating 2^15) and the word order of
// gemvFP4QAVX2. It returns 1, or 0 when a block needs the float path.
func packFP4QAVX2() {
	name := "packFP4QAVX2"
	TEXT(name, NOSPLIT, "func(dst *byte, a *float32, chunks int, c *byte) uint32")
	Doc(name + " packs chunks 64-element chunks of a into dst as packFP4Q does; it returns 0 when a block has an Inf, a NaN or a tiny nonzero maximum.")
	dst := Load(Param("dst"), GP64())
	a := Load(Param("a"), GP64())
	n := Load(Param("chunks"), GP64())
	cp := Load(Param("c"), GP64())
	absMask := constVec(0x7FFFFFFF, false)
	ctl := YMM()
	VMOVDQU(Mem{Base: cp}, ctl)
	ret := GP32()
	MOVL(U32(1), ret)
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	Label(name + "_loop")
	for l := 0; l < 2; l++ {
		d := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
		m := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
		for j := range d {
			VMOVUPS(Mem{Base: a, Disp: 128*l + 32*j}, d[j])
			VPAND(absMask, d[j], m[j])
		}
		VPMAXUD(m[1], m[0], m[0])
		VPMAXUD(m[3], m[2], m[2])
		VPMAXUD(m[2], m[0], m[0])
		hx := XMM()
		VEXTRACTI128(Imm(1), m[0], hx)
		VPMAXUD(hx, m[0].AsX(), hx)
		t := XMM()
		VPSHUFD(Imm(0x4E), hx, t)
		VPMAXUD(t, hx, hx)
		VPSHUFD(Imm(0xB1), hx, t)
		VPMAXUD(t, hx, hx)
		amax, eb, mul, fac := GP32(), GP32(), GP32(), GP32()
		VMOVD(hx, amax)
		XORL(mul, mul)
		XORL(fac, fac)
		CMPL(amax, U32(0x7F800000))
		JAE(LabelRef(name + "_fail"))
		TESTL(amax, amax)
		JZ(LabelRef(fmt.Sprintf("%s_zero%d", name, l)))
		MOVL(amax, eb)
		SHRL(Imm(23), eb)
		CMPL(eb, Imm(24))
		JB(LabelRef(name + "_fail"))
		MOVL(U32(268), mul)
		SUBL(eb, mul)
		SHLL(Imm(23), mul)
		LEAL(Mem{Base: eb, Disp: -23}, fac)
		SHLL(Imm(23), fac)
		Label(fmt.Sprintf("%s_zero%d", name, l))
		mv, fv := XMM(), YMM()
		VMOVD(mul, mv)
		VPBROADCASTD(mv, fv)
		for j := range d {
			VMULPS(fv, d[j], d[j])
			VCVTPS2DQ(d[j], d[j])
		}
		VMOVD(fac, mv)
		VPBROADCASTD(mv, mv)
		VMOVDQU(mv, Mem{Base: dst, Disp: 128 + 16*l})
		// words [0..3 8..11 | 4..7 12..15] and [16.. 24.. | 20.. 28..]
		VPACKSSDW(d[1], d[0], d[0])
		VPACKSSDW(d[3], d[2], d[2])
		// in each lane [a0 b0 a2 b2 a1 b1 a3 b3] of [a0..a3 b0..b3]
		VPSHUFB(ctl, d[0], d[0])
		VPSHUFB(ctl, d[2], d[2])
		x, y := YMM(), YMM()
		VPERM2I128(Imm(0x20), d[2], d[0], x) // low lanes
		VPERM2I128(Imm(0x31), d[2], d[0], y) // high lanes
		u, v := YMM(), YMM()
		VPUNPCKLWD(y, x, u) // [4i | 4i+2] halves
		VPUNPCKHWD(y, x, v) // [4i+1 | 4i+3] halves
		VPERMQ(Imm(0xD8), u, u)
		VPERMQ(Imm(0xD8), v, v)
		VMOVDQU(u.AsX(), Mem{Base: dst, Disp: 16 * l})
		VEXTRACTI128(Imm(1), u, Mem{Base: dst, Disp: 32 + 16*l})
		VMOVDQU(v.AsX(), Mem{Base: dst, Disp: 64 + 16*l})
		VEXTRACTI128(Imm(1), v, Mem{Base: dst, Disp: 96 + 16*l})
	}
	ADDQ(U32(256), a)
	ADDQ(U32(160), dst)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	JMP(LabelRef(name + "_end"))
	Label(name + "_fail")
	XORL(ret, ret)
	Label(name + "_end")
	VZEROUPPER()
	Store(ret, ReturnIndex(0))
	RET()
}

// activationRows sets up the addressing of the gemv kernels' r activation
// rows (stride lda bytes from the row pointer ac, r ≤ 4): row i at disp.
func activationRows(ac, lda reg.Register, r int) func(i, disp int) Mem {
	var lda3, lda5, lda7 reg.GPVirtual
	if r >= 3 {
		lda3 = GP64()
		LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, lda3)
	}
	if r >= 6 { // (rows 4–7 for the 8-row kernels)
		lda5, lda7 = GP64(), GP64()
		LEAQ(Mem{Base: lda, Index: lda, Scale: 4}, lda5)
		LEAQ(Mem{Base: lda3, Index: lda, Scale: 4}, lda7)
	}
	return func(i, disp int) Mem {
		switch i {
		case 0:
			return Mem{Base: ac, Disp: disp}
		case 1:
			return Mem{Base: ac, Index: lda, Scale: 1, Disp: disp}
		case 2:
			return Mem{Base: ac, Index: lda, Scale: 2, Disp: disp}
		case 4:
			return Mem{Base: ac, Index: lda, Scale: 4, Disp: disp}
		case 5:
			return Mem{Base: ac, Index: lda5, Scale: 1, Disp: disp}
		case 6:
			return Mem{Base: ac, Index: lda3, Scale: 2, Disp: disp}
		case 7:
			return Mem{Base: ac, Index: lda7, Scale: 1, Disp: disp}
		}
		return Mem{Base: ac, Index: lda3, Scale: 1, Disp: disp}
	}
}

// storeRowSums ends a gemv kernel's weight row: it adds each activation
// row's accumulator chains pairwise (acc[i][c] += acc[i][c+h], h halving),
// reduces the lanes and stores row i's sum at out + i·ldo floats (ldo the
// kernel's parameter).
func storeRowSums(acc [][]reg.VecVirtual, o reg.Register) {
	ldo := Load(Param("ldo"), GP64())
	SHLQ(Imm(2), ldo)
	oi := GP64()
	MOVQ(o, oi)
	for i := range acc {
		for h := len(acc[i]) / 2; h > 0; h /= 2 {
			for c := range h {
				VADDPS(acc[i][c+h], acc[i][c], acc[i][c])
			}
		}
		storeSum(acc[i][0], Mem{Base: oi})
		if i+1 < len(acc) {
			ADDQ(ldo, oi)
		}
	}
}

// storeSum reduces the ymm x and stores the float32 at m.
func storeSum(x reg.VecVirtual, m Mem) {
	xl := XMM()
	VEXTRACTF128(Imm(1), x, xl)
	VADDPS(x.AsX(), xl, xl)
	t := XMM()
	VMOVHLPS(xl, xl, t)
	VADDPS(t, xl, xl)
	VMOVSHDUP(xl, t)
	VADDSS(t, xl, xl)
	VMOVSS(xl, m)
}

// gemvFP8AVX2 emits gemvFP8AVX2x<r>: r activation rows (stride lda floats,
// each 32-block permuted by permuteFP8x32) against rows consecutive e4m3
// weight rows of nb 32-blocks each (codes contiguous) that share the block
// factors f (f[b] = 2^(s_b−7) as float32, s_b ≤ 134: one 32-row group).
//
// A block (32 bytes) is dequantised once for all activation rows without a
// byte-to-dword widening: its 16 words hold two codes each; the high code is
// placed by an arithmetic shift (VPSRAW 4, mask 0x87F0: the bf16 of
// e4m3·2^-120), the low one after VPSLLW 8, and each bf16 word vector is
// split into two f32 vectors (VPSLLD 16 / mask 0xFFFF0000). The four f32
// vectors hold the block's elements 4d+1, 4d+3, 4d and 4d+2 (d < 8), the
// order permuteFP8x32 gives the activations. Each row's block partial is
// scaled by f[b]; out[i*ldo+j] receives the sum of activation row i and
// weight row j. It returns nan ≠ 0 when a NaN code was met.
func gemvFP8AVX2(r int) {
	name := fmt.Sprintf("gemvFP8AVX2x%d", r)
	TEXT(name, NOSPLIT, "func(a *float32, lda int, w *byte, f *float32, nb, rows int, out *float32, ldo int) (nan uint32)")
	Doc(fmt.Sprintf("%s computes out[i*ldo+j] = Σ_blocks f[b]·Σ a_i·e4m3(w_j)·2^-120 for %d activation rows a_i = a[i*lda:] (permuted) and rows weight rows.", name, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	w := Load(Param("w"), GP64())
	rows := Load(Param("rows"), GP64())
	o := Load(Param("out"), GP64())
	SHLQ(Imm(2), lda)
	mask := constVec(0x87F087F0, false)
	hiMask := constVec(0xFFFF0000, false)
	b7f := constVec(0x7F7F7F7F, false)
	flag := YMM()
	VPXOR(flag, flag, flag)
	ac := GP64()
	rowMem := activationRows(ac, lda, r)
	chains := 1
	if r <= 2 {
		chains = 2
	}
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Label(name + "_row")
	MOVQ(a, ac)
	f := Load(Param("f"), GP64())
	nb := Load(Param("nb"), GP64())
	acc := make([][]reg.VecVirtual, r)
	for i := range acc {
		for range chains {
			x := YMM()
			VXORPS(x, x, x)
			acc[i] = append(acc[i], x)
		}
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for blk := 0; blk < chains; blk++ {
		if blk == 0 {
			prefetch(w)
		}
		x := YMM()
		VMOVDQU(Mem{Base: w}, x)
		nt := YMM()
		VPAND(x, b7f, nt)
		VPCMPEQB(b7f, nt, nt)
		VPOR(nt, flag, flag)
		hi, lo := YMM(), YMM()
		VPSRAW(Imm(4), x, hi)
		VPSLLW(Imm(8), x, lo)
		VPSRAW(Imm(4), lo, lo)
		VPAND(mask, hi, hi)
		VPAND(mask, lo, lo)
		p := make([]reg.VecVirtual, r)
		for i := range p {
			p[i] = YMM()
		}
		for q, src := range []reg.VecVirtual{hi, hi, lo, lo} {
			v := YMM()
			if q%2 == 0 {
				VPSLLD(Imm(16), src, v)
			} else {
				VPAND(hiMask, src, v)
			}
			for i := 0; i < r; i++ {
				if q == 0 {
					VMULPS(rowMem(i, 32*q), v, p[i])
				} else {
					VFMADD231PS(rowMem(i, 32*q), v, p[i])
				}
			}
		}
		sf := YMM()
		VBROADCASTSS(Mem{Base: f}, sf)
		for i := 0; i < r; i++ {
			VFMADD231PS(sf, p[i], acc[i][blk])
		}
		ADDQ(U32(128), ac)
		ADDQ(Imm(32), w)
		ADDQ(Imm(4), f)
		DECQ(nb)
		if blk+1 < chains {
			JZ(LabelRef(name + "_done"))
		}
	}
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	storeRowSums(acc, o)
	ADDQ(Imm(4), o)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	Label(name + "_end")
	rr := GP32()
	VPMOVMSKB(flag, rr)
	Store(rr, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// gemvFP8AVX512 emits gemvFP8AVX512x<r>, gemvFP8AVX2x<r> on two blocks per
// zmm with the same result bit for bit. The activations are permuted by
// permuteFP8x32Pairs: per pair of blocks the four 8-float vectors of
// permuteFP8x32 interleaved, [q of block 2p | q of block 2p+1] (64 bytes
// each); an odd last block as permuteFP8x32 leaves it. The 64 code bytes of
// a pair are dequantised to the words gemvFP8AVX2 makes of one block, in the
// zmm halves, with VPMADDUBSW by 16 placing a word's high or low code (the
// sign-extended code shifted left by 4, as its VPSRAW 4 does; one multiply
// where the low codes took two shifts, the kernel being bound by its vector
// ports on Intel cores), and each lane sees the AVX2 kernel's floating-point
// operations in its order: for r ≤ 2
// the AVX2 kernel's two chains (even and odd blocks) are the zmm
// accumulator's halves (the odd last block goes to the low half by a masked
// FMA); for r > 2 the one 8-lane chain takes the pair's halves in turn.
func gemvFP8AVX512(r int) {
	name := fmt.Sprintf("gemvFP8AVX512x%d", r)
	TEXT(name, NOSPLIT, "func(a *float32, lda int, w *byte, f *float32, nb, rows int, out *float32, ldo int) (nan uint32)")
	Doc(fmt.Sprintf("%s is gemvFP8AVX2x%d (the same result bit for bit) on block pairs in zmm, %d activation rows permuted by permuteFP8x32Pairs.", name, r, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	w := Load(Param("w"), GP64())
	rows := Load(Param("rows"), GP64())
	o := Load(Param("out"), GP64())
	SHLQ(Imm(2), lda)
	mask := constVec(0x87F087F0, true)
	hiMask := constVec(0xFFFF0000, true)
	b7f := constVec(0x7F7F7F7F, true)
	// VPMADDUBSW's unsigned byte factors: 16 for the high (k16hi) or the
	// low (k16lo) byte of each word, 0 for the other
	k16hi := constVec(0x10001000, true)
	k16lo := constVec(0x00100010, true)
	flag := ZMM()
	VPXORD(flag, flag, flag)
	lowHalf := K()
	{
		t := GP32()
		MOVL(U32(0xFF), t)
		KMOVW(t, lowHalf)
	}
	ac := GP64()
	rowMem := activationRows(ac, lda, r)
	wide := r <= 2 // the AVX2 kernel's two chains = the zmm halves
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Label(name + "_row")
	MOVQ(a, ac)
	f := Load(Param("f"), GP64())
	nb := Load(Param("nb"), GP64())
	np := GP64()
	MOVQ(nb, np)
	SHRQ(Imm(1), np)
	acc := make([]reg.VecVirtual, r)
	for i := range acc {
		if wide {
			acc[i] = ZMM()
			VPXORD(acc[i], acc[i], acc[i])
		} else {
			acc[i] = YMM()
			VPXORD(acc[i], acc[i], acc[i])
		}
	}
	// dequant emits the dequantisation of the codes at w (zmm: a pair;
	// ymm: one block) and the products p[i] = Σ_q a_q·v_q, each lane in
	// gemvFP8AVX2's order.
	dequant := func(z bool) []reg.VecVirtual {
		v := func() reg.VecVirtual {
			if z {
				return ZMM()
			}
			return YMM()
		}
		cv := func(x reg.VecVirtual) reg.VecVirtual {
			if z {
				return x
			}
			return x.AsY().(reg.VecVirtual)
		}
		x := v()
		if z {
			VMOVDQU64(Mem{Base: w}, x)
		} else {
			VMOVDQU64(Mem{Base: w}, x)
		}
		nt := v()
		VPANDD(x, cv(b7f), nt)
		if z {
			VPMAXUB(nt, flag, flag)
		} else {
			// (a ymm write would clear the flag's high half)
			VPMAXUB(nt.AsZ(), flag, flag)
		}
		// 16·(signed code) in each word, the code of the word's high byte
		// (hi) or low byte (lo): VPSRAW 4 of gemvFP8AVX2 (resp. VPSLLW 8
		// and VPSRAW 4) but for bits 0..3, which the mask clears; one
		// multiply instead of one or two shifts
		hi, lo := v(), v()
		VPMADDUBSW(x, cv(k16hi), hi)
		VPMADDUBSW(x, cv(k16lo), lo)
		VPANDD(cv(mask), hi, hi)
		VPANDD(cv(mask), lo, lo)
		p := make([]reg.VecVirtual, r)
		for i := range p {
			p[i] = v()
		}
		for q, src := range []reg.VecVirtual{hi, hi, lo, lo} {
			u := v()
			if q%2 == 0 {
				VPSLLD(Imm(16), src, u)
			} else {
				VPANDD(cv(hiMask), src, u)
			}
			step := 32
			if z {
				step = 64
			}
			for i := 0; i < r; i++ {
				if q == 0 {
					VMULPS(rowMem(i, step*q), u, p[i])
				} else {
					VFMADD231PS(rowMem(i, step*q), u, p[i])
				}
			}
		}
		return p
	}
	TESTQ(np, np)
	JZ(LabelRef(name + "_tail"))
	Label(name + "_loop")
	prefetch(w)
	p := dequant(true)
	if wide {
		sf, s1 := ZMM(), YMM()
		VBROADCASTSS(Mem{Base: f}, sf)
		VBROADCASTSS(Mem{Base: f, Disp: 4}, s1)
		VINSERTF64X4(Imm(1), s1, sf, sf)
		for i := 0; i < r; i++ {
			VFMADD231PS(sf, p[i], acc[i])
		}
	} else {
		s0, s1 := YMM(), YMM()
		VBROADCASTSS(Mem{Base: f}, s0)
		VBROADCASTSS(Mem{Base: f, Disp: 4}, s1)
		for i := 0; i < r; i++ {
			h := YMM()
			VEXTRACTF64X4(Imm(1), p[i], h)
			VFMADD231PS(s0, p[i].AsY(), acc[i])
			VFMADD231PS(s1, h, acc[i])
		}
	}
	ADDQ(U32(256), ac)
	ADDQ(Imm(64), w)
	ADDQ(Imm(8), f)
	DECQ(np)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(U32(1), nb)
	JZ(LabelRef(name + "_done"))
	{
		p := dequant(false)
		if wide {
			sf := ZMM()
			VBROADCASTSS(Mem{Base: f}, sf)
			for i := 0; i < r; i++ {
				VFMADD231PS(sf, p[i].AsZ(), lowHalf, acc[i])
			}
		} else {
			sf := YMM()
			VBROADCASTSS(Mem{Base: f}, sf)
			for i := 0; i < r; i++ {
				VFMADD231PS(sf, p[i], acc[i])
			}
		}
		ADDQ(Imm(32), w)
	}
	Label(name + "_done")
	ldo := Load(Param("ldo"), GP64())
	SHLQ(Imm(2), ldo)
	oi := GP64()
	MOVQ(o, oi)
	for i := range acc {
		x := acc[i]
		if wide {
			h := YMM()
			VEXTRACTF64X4(Imm(1), acc[i], h)
			x = acc[i].AsY().(reg.VecVirtual)
			VADDPS(h, x, x) // acc[0] + acc[1] of the AVX2 kernel
		}
		storeSum512(x, Mem{Base: oi})
		if i+1 < len(acc) {
			ADDQ(ldo, oi)
		}
	}
	ADDQ(Imm(4), o)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	Label(name + "_end")
	fl := YMM()
	VEXTRACTI64X4(Imm(1), flag, fl)
	VPMAXUB(fl, flag.AsY(), fl)
	k := K()
	VPCMPEQB(b7f.AsY(), fl, k)
	rr := GP32()
	KMOVD(k, rr)
	Store(rr, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// storeSum512 is storeSum with EVEX-encodable instructions (x may be any of
// the 32 vector registers): the same additions.
func storeSum512(x reg.VecVirtual, m Mem) {
	xl := XMM()
	VEXTRACTF32X4(Imm(1), x, xl)
	VADDPS(x.AsX(), xl, xl)
	t := XMM()
	VSHUFPS(Imm(0xEE), xl, xl, t) // (VMOVHLPS: the high pair)
	VADDPS(t, xl, xl)
	VMOVSHDUP(xl, t)
	VADDSS(t, xl, xl)
	VMOVSS(xl, m)
}

// dotBF16AVX2 emits dotBF16AVX2: dotF32AVX2 with b given as bf16 (widened
// exactly by a shift), in dotF32AVX2's summation order (bit-identical to it
// on the widened values).
func dotBF16AVX2() { dotBF16("dotBF16AVX2", false) }

// dotBF16AVX512 emits dotBF16AVX512: dotBF16AVX2 with 16-lane vectors, in
// dotF32AVX512's order (bit-identical to it on the widened values).
func dotBF16AVX512() { dotBF16("dotBF16AVX512", true) }

func dotBF16(name string, avx512 bool) {
	level, lanes := "dotF32AVX2", 8
	if avx512 {
		level, lanes = "dotF32AVX512", 16
	}
	TEXT(name, NOSPLIT, "func(a *float32, b *byte, n int) float32")
	Doc(fmt.Sprintf("%s returns Σ a[i]·bf16(b[i]) in %s's order; n must be a multiple of %d.", name, level, lanes))
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	acc := make([]reg.VecVirtual, 4)
	for i := range acc {
		acc[i] = vec(avx512)
		zero(acc[i], avx512)
	}
	widen := func(disp int) reg.VecVirtual {
		x := vec(avx512)
		VPMOVZXWD(Mem{Base: b, Disp: disp}, x)
		VPSLLD(Imm(16), x, x)
		return x
	}
	vbA, vbB := 4*lanes, 2*lanes // bytes per vector of a and of b
	CMPQ(n, U32(4*lanes))
	JL(LabelRef(name + "_one"))
	Label(name + "_four")
	prefetch(b) // weight rows are streamed from DRAM
	for i := range acc {
		x := widen(vbB * i)
		VFMADD231PS(Mem{Base: a, Disp: vbA * i}, x, acc[i])
	}
	ADDQ(U32(4*vbA), a)
	ADDQ(U32(4*vbB), b)
	SUBQ(U32(4*lanes), n)
	CMPQ(n, U32(4*lanes))
	JGE(LabelRef(name + "_four"))
	Label(name + "_one")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	x := widen(0)
	VFMADD231PS(Mem{Base: a}, x, acc[0])
	ADDQ(U32(vbA), a)
	ADDQ(U32(vbB), b)
	SUBQ(U32(lanes), n)
	JMP(LabelRef(name + "_one"))
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	hsum(acc[0], avx512, "")
	VZEROUPPER()
	RET()
}

// dotBF16RowsAVX512 emits dotBF16AVX512x<r>: dotBF16AVX512 of r activation
// rows (stride lda floats) with one bf16 weight row, each row's sum in
// dotBF16AVX512's order bit for bit; the weight row is widened once for all
// of them. out[i] receives row i's sum.
func dotBF16RowsAVX512(r int) {
	name := fmt.Sprintf("dotBF16AVX512x%d", r)
	TEXT(name, NOSPLIT, "func(a *float32, lda int, b *byte, n int, out *float32)")
	Doc(fmt.Sprintf("%s sets out[i] = dotBF16AVX512(a[i*lda:], b, n) for i < %d (bit for bit); n must be a multiple of 16.", name, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	o := Load(Param("out"), GP64())
	SHLQ(Imm(2), lda)
	rowMemLo := activationRows(a, lda, min(r, 4))
	var a4 reg.GPVirtual
	var rowMemHi func(i, disp int) Mem
	if r > 4 {
		a4 = GP64()
		LEAQ(Mem{Base: a, Index: lda, Scale: 4}, a4)
		rowMemHi = activationRows(a4, lda, r-4)
	}
	rowMem := func(i, disp int) Mem {
		if i < 4 {
			return rowMemLo(i, disp)
		}
		return rowMemHi(i-4, disp)
	}
	acc := make([][]reg.VecVirtual, r)
	for i := range acc {
		for range 4 {
			x := ZMM()
			VPXORD(x, x, x)
			acc[i] = append(acc[i], x)
		}
	}
	widen := func(disp int) reg.VecVirtual {
		x := ZMM()
		VPMOVZXWD(Mem{Base: b, Disp: disp}, x)
		VPSLLD(Imm(16), x, x)
		return x
	}
	advance := func(vecs int) {
		ADDQ(U32(64*vecs), a)
		if r > 4 {
			ADDQ(U32(64*vecs), a4)
		}
		ADDQ(U32(32*vecs), b)
		SUBQ(U32(16*vecs), n)
	}
	CMPQ(n, U32(64))
	JL(LabelRef(name + "_one"))
	Label(name + "_four")
	if pfDist > 0 { // both lines of the 128 bytes, further ahead than dotBF16 (r rows' FMAs per line)
		PREFETCHT0(Mem{Base: b, Disp: bf16RowsPfDist})
		PREFETCHT0(Mem{Base: b, Disp: bf16RowsPfDist + 64})
	}
	for v := range 4 {
		x := widen(32 * v)
		for i := 0; i < r; i++ {
			VFMADD231PS(rowMem(i, 64*v), x, acc[i][v])
		}
	}
	advance(4)
	CMPQ(n, U32(64))
	JGE(LabelRef(name + "_four"))
	Label(name + "_one")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	x := widen(0)
	for i := 0; i < r; i++ {
		VFMADD231PS(rowMem(i, 0), x, acc[i][0])
	}
	advance(1)
	JMP(LabelRef(name + "_one"))
	Label(name + "_done")
	for i := range acc {
		VADDPS(acc[i][1], acc[i][0], acc[i][0])
		VADDPS(acc[i][3], acc[i][2], acc[i][2])
		VADDPS(acc[i][2], acc[i][0], acc[i][0])
		y := YMM()
		VEXTRACTF64X4(Imm(1), acc[i][0], y)
		VADDPS(acc[i][0].AsY(), y, y)
		storeSum512(y, Mem{Base: o, Disp: 4 * i})
	}
	VZEROUPPER()
	RET()
}

// lanes32AVX2 emits lanes32AVX2: 32 independent sums in the lanes of 4
// vectors, each in the scalar reference order acc = acc + fl(x[d]·p[d][l])
// for d ascending (VMULPS then VADDPS: no fusion), so that every lane is
// bit-identical to the sequential fp32 loop.
func lanes32AVX2() {
	name := "lanes32AVX2"
	TEXT(name, NOSPLIT, "func(x *float32, p *float32, n int, out *float32)")
	Doc(name + " sets out[l] = Σ_d fl(x[d]·p[d*32+l]) (sequential in d, from +0) for l < 32.")
	x := Load(Param("x"), GP64())
	p := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
	acc := make([]reg.VecVirtual, 4)
	for i := range acc {
		acc[i] = YMM()
		zero(acc[i], false)
	}
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	bx := YMM()
	VBROADCASTSS(Mem{Base: x}, bx)
	for i := range acc {
		t := YMM()
		VMULPS(Mem{Base: p, Disp: 32 * i}, bx, t)
		VADDPS(t, acc[i], acc[i])
	}
	ADDQ(Imm(4), x)
	ADDQ(U32(128), p)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	o := Load(Param("out"), GP64())
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: o, Disp: 32 * i})
	}
	VZEROUPPER()
	RET()
}

// loraFP8AVX2 emits loraFP8x<8g>AVX2: 8g outputs of the grouped LoRA with
// e4m3 weights, each summed sequentially (VMULPS then VADDPS, from +0) in
// its lane: every 8×8 tile of weights is dequantised exactly (the scale
// bytes must lie in 10..134 so that every non-NaN value is a normal f32
// equal to bf16(e4m3·e8m0); NaN codes are reported) and transposed in
// registers; g groups of 8 rows give g independent addition chains.
func loraFP8AVX2(g int) {
	name := fmt.Sprintf("loraFP8x%dAVX2", 8*g)
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, ldw int, s *byte, nb int, out *float32) (nan uint32)")
	Doc(fmt.Sprintf("%s sets out[l] = Σ_d fl(x[d]·w_l[d]) (sequential in d) for the %d e4m3 rows w_l = w[l*ldw:] of nb 32-blocks sharing the scale bytes s; nan ≠ 0 when a NaN code was met.", name, 8*g))
	x := Load(Param("x"), GP64())
	w := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	s := Load(Param("s"), GP64())
	nb := Load(Param("nb"), GP64())
	ld3, ld5, ld7 := GP64(), GP64(), GP64()
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 2}, ld3)
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 4}, ld5)
	LEAQ(Mem{Base: ld3, Index: ldw, Scale: 4}, ld7)
	bases := []reg.Register{w}
	if g == 2 {
		w8 := GP64()
		LEAQ(Mem{Base: w, Index: ldw, Scale: 8}, w8)
		bases = append(bases, w8)
	}
	rowMem := func(base reg.Register, l, disp int) Mem {
		switch l {
		case 0:
			return Mem{Base: base, Disp: disp}
		case 1:
			return Mem{Base: base, Index: ldw, Scale: 1, Disp: disp}
		case 2:
			return Mem{Base: base, Index: ldw, Scale: 2, Disp: disp}
		case 3:
			return Mem{Base: base, Index: ld3, Scale: 1, Disp: disp}
		case 4:
			return Mem{Base: base, Index: ldw, Scale: 4, Disp: disp}
		case 5:
			return Mem{Base: base, Index: ld5, Scale: 1, Disp: disp}
		case 6:
			return Mem{Base: base, Index: ld3, Scale: 2, Disp: disp}
		}
		return Mem{Base: base, Index: ld7, Scale: 1, Disp: disp}
	}
	mask := constVec(0x87F00000, false)
	b7f := constVec(0x7F7F7F7F, false)
	flag := YMM()
	VPXOR(flag, flag, flag)
	acc := make([]reg.VecVirtual, g)
	for i := range acc {
		acc[i] = YMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	// each base's 8×32 code block, transposed: 8 vectors of 4 groups of 8
	// bytes (the 8 rows at one d), see transposeBytes8
	buf := AllocLocal(256 * g)
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_block")
	f := YMM()
	scaleFactor(s, 120, f, false)
	for gi, base := range bases {
		r := make([]reg.VecVirtual, 8)
		for l := range r {
			r[l] = YMM()
			VMOVDQU(rowMem(base, l, 0), r[l])
			nt := YMM()
			VPAND(r[l], b7f, nt)
			VPCMPEQB(b7f, nt, nt)
			VPOR(nt, flag, flag)
		}
		for k, v := range transposeBytes8(r) {
			VMOVDQU(v, buf.Offset(256*gi+32*k))
		}
	}
	for d := 0; d < 32; d++ {
		bx := YMM()
		VBROADCASTSS(Mem{Base: x, Disp: 4 * d}, bx)
		dd := d % 16
		off := 32*(dd/2) + 16*(d/16) + 8*(dd%2)
		for gi := range bases {
			c := YMM()
			VPMOVSXBD(buf.Offset(256*gi+off), c)
			VPSLLD(Imm(20), c, c)
			VPAND(mask, c, c)
			VMULPS(f, c, c)
			VMULPS(bx, c, c)
			VADDPS(c, acc[gi], acc[gi])
		}
	}
	ADDQ(U32(128), x)
	for _, base := range bases {
		ADDQ(Imm(32), base)
	}
	INCQ(s)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	Label(name + "_done")
	o := Load(Param("out"), GP64())
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: o, Disp: 32 * i})
	}
	rr := GP32()
	VPMOVMSKB(flag, rr)
	Store(rr, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// transposeBytes8 transposes 8 rows of 32 bytes (r[l] = row l) by three
// levels of unpacks: vector k of the result holds, in its low 128-bit lane,
// the 8 rows' bytes at d = 2k (bytes 0..7) and d = 2k+1 (8..15), and in its
// high lane those at d = 16+2k and 17+2k.
func transposeBytes8(r []reg.VecVirtual) []reg.VecVirtual {
	t := make([]reg.VecVirtual, 8)
	for i := 0; i < 4; i++ {
		t[2*i], t[2*i+1] = YMM(), YMM()
		VPUNPCKLBW(r[2*i+1], r[2*i], t[2*i])   // rows 2i, 2i+1 at d 0..7 (lane: +16)
		VPUNPCKHBW(r[2*i+1], r[2*i], t[2*i+1]) // d 8..15
	}
	u := make([]reg.VecVirtual, 8)
	for h := 0; h < 2; h++ { // rows 0..3, rows 4..7
		a, b, c, e := t[4*h], t[4*h+2], t[4*h+1], t[4*h+3]
		u[4*h], u[4*h+1], u[4*h+2], u[4*h+3] = YMM(), YMM(), YMM(), YMM()
		VPUNPCKLWD(b, a, u[4*h])   // d 0..3
		VPUNPCKHWD(b, a, u[4*h+1]) // d 4..7
		VPUNPCKLWD(e, c, u[4*h+2]) // d 8..11
		VPUNPCKHWD(e, c, u[4*h+3]) // d 12..15
	}
	v := make([]reg.VecVirtual, 8)
	for q := 0; q < 4; q++ {
		v[2*q], v[2*q+1] = YMM(), YMM()
		VPUNPCKLDQ(u[4+q], u[q], v[2*q])   // d 4q, 4q+1
		VPUNPCKHDQ(u[4+q], u[q], v[2*q+1]) // d 4q+2, 4q+3
	}
	return v
}

// qkF64AVX2 emits qkF64AVX2x<g>: the float64 dots of 4g heads' queries with
// one key row, the heads in vector lanes: out[h] = Σ_i fl64(q_h[i]·k[i])
// summed sequentially in i from +0 (VMULPD then VADDPD; the products of
// two f32 are exact in float64), bit-identical to the scalar loop.
// qT is the queries transposed, qT[i*ldq+h].
func qkF64AVX2(g int) {
	name := fmt.Sprintf("qkF64AVX2x%d", g)
	TEXT(name, NOSPLIT, "func(qT *float64, ldq int, k *float32, n int, out *float64)")
	Doc(fmt.Sprintf("%s sets out[h] = Σ_i qT[i*ldq+h]·k[i] (sequential float64 sums) for h < %d.", name, 4*g))
	q := Load(Param("qT"), GP64())
	ldq := Load(Param("ldq"), GP64())
	k := Load(Param("k"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(3), ldq)
	acc := make([]reg.VecVirtual, g)
	for i := range acc {
		acc[i] = YMM()
		VXORPD(acc[i], acc[i], acc[i])
	}
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	kx := XMM()
	VCVTSS2SD(Mem{Base: k}, kx, kx)
	kb := YMM()
	VBROADCASTSD(kx, kb)
	for i := range acc {
		t := YMM()
		VMULPD(Mem{Base: q, Disp: 32 * i}, kb, t)
		VADDPD(t, acc[i], acc[i])
	}
	ADDQ(ldq, q)
	ADDQ(Imm(4), k)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	o := Load(Param("out"), GP64())
	for i := range acc {
		VMOVUPD(acc[i], Mem{Base: o, Disp: 32 * i})
	}
	VZEROUPPER()
	RET()
}

// qkF32KeysAVX2 emits qkF32AVX2g<g>k<nk>: the attention logits of nk keys
// against 8g heads (f32, heads in lanes: qT [n][ldq]), each lane one FMA
// chain over i = 0..n-1, so a head's logit does not depend on how many
// heads or keys share the call.
func qkF32KeysAVX2(g, nk int) {
	name := fmt.Sprintf("qkF32AVX2g%dk%d", g, nk)
	sig := "func(qT *float32, ldq int"
	for j := range nk {
		sig += fmt.Sprintf(", k%d", j)
	}
	sig += " *float32, n int, out *float32)"
	TEXT(name, NOSPLIT, sig)
	Doc(fmt.Sprintf("%s sets out[j*%d+h] = Σ_i qT[i*ldq+h]·k_j[i] (one f32 FMA chain in i) for h < %d and the %d keys k_j.", name, 8*g, 8*g, nk))
	q := Load(Param("qT"), GP64())
	ldq := Load(Param("ldq"), GP64())
	ks := []reg.Register{}
	for j := range nk {
		ks = append(ks, Load(Param(fmt.Sprintf("k%d", j)), GP64()))
	}
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), ldq)
	acc := make([][]reg.VecVirtual, nk)
	for j := range acc {
		for range g {
			x := YMM()
			VXORPS(x, x, x)
			acc[j] = append(acc[j], x)
		}
	}
	i := GP64()
	XORQ(i, i)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	qv := make([]reg.VecVirtual, g)
	for v := range qv {
		qv[v] = YMM()
		VMOVUPS(Mem{Base: q, Disp: 32 * v}, qv[v])
	}
	for j, kp := range ks {
		kb := YMM()
		VBROADCASTSS(Mem{Base: kp, Index: i, Scale: 4}, kb)
		for v := range qv {
			VFMADD231PS(qv[v], kb, acc[j][v])
		}
	}
	ADDQ(ldq, q)
	INCQ(i)
	CMPQ(i, n)
	JNE(LabelRef(name + "_loop"))
	Label(name + "_done")
	o := Load(Param("out"), GP64())
	for j := range acc {
		for v, a := range acc[j] {
			VMOVUPS(a, Mem{Base: o, Disp: 32 * (j*g + v)})
		}
	}
	VZEROUPPER()
	RET()
}

// axpyF32AVX2 emits axpyF32AVX2k<nk>: pv[i] = fma(p_{nk-1}, k_{nk-1}[i],
// … fma(p_0, k_0[i], pv[i])) for i < n (a multiple of 8): the keys' terms
// in order, one rounding each, the same bits as nk calls with one key.
func axpyF32AVX2(nk int) {
	name := fmt.Sprintf("axpyF32AVX2k%d", nk)
	sig := "func(pv *float32, p *float32"
	for j := range nk {
		sig += fmt.Sprintf(", k%d", j)
	}
	sig += " *float32, n int)"
	TEXT(name, NOSPLIT, sig)
	Doc(fmt.Sprintf("%s adds p[j]·k_j[i] to pv[i] for the %d keys in order (f32 FMAs), n a multiple of 8.", name, nk))
	pv := Load(Param("pv"), GP64())
	pp := Load(Param("p"), GP64())
	ks := []reg.Register{}
	for j := range nk {
		ks = append(ks, Load(Param(fmt.Sprintf("k%d", j)), GP64()))
	}
	n := Load(Param("n"), GP64())
	pb := make([]reg.VecVirtual, nk)
	for j := range pb {
		pb[j] = YMM()
		VBROADCASTSS(Mem{Base: pp, Disp: 4 * j}, pb[j])
	}
	i := GP64()
	XORQ(i, i)
	const unroll = 4
	n4 := GP64()
	MOVQ(n, n4)
	SHRQ(Imm(5), n4) // 32 = 8·unroll floats per iteration
	SHLQ(Imm(5), n4)
	// unrolled: 4 vectors (32 floats) per iteration, then single vectors
	CMPQ(n4, Imm(0))
	JE(LabelRef(name + "_tail"))
	Label(name + "_loop")
	acc := make([]reg.VecVirtual, unroll)
	for u := range acc {
		acc[u] = YMM()
		VMOVUPS(Mem{Base: pv, Index: i, Scale: 4, Disp: 32 * u}, acc[u])
	}
	for j, kp := range ks {
		for u := range acc {
			VFMADD231PS(Mem{Base: kp, Index: i, Scale: 4, Disp: 32 * u}, pb[j], acc[u])
		}
	}
	for u := range acc {
		VMOVUPS(acc[u], Mem{Base: pv, Index: i, Scale: 4, Disp: 32 * u})
	}
	ADDQ(Imm(8*unroll), i)
	CMPQ(i, n4)
	JNE(LabelRef(name + "_loop"))
	Label(name + "_tail")
	CMPQ(i, n)
	JE(LabelRef(name + "_done"))
	a := YMM()
	VMOVUPS(Mem{Base: pv, Index: i, Scale: 4}, a)
	for j, kp := range ks {
		VFMADD231PS(Mem{Base: kp, Index: i, Scale: 4}, pb[j], a)
	}
	VMOVUPS(a, Mem{Base: pv, Index: i, Scale: 4})
	ADDQ(Imm(8), i)
	JMP(LabelRef(name + "_tail"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// axpyF32AVX512 emits axpyF32AVX512k<nk>: axpyF32AVX2k<nk> on 16 floats a
// vector (a ymm tail for n ≡ 8 mod 16). Each element sees the same FMAs in
// the same order, so the bits are axpyF32AVX2k<nk>'s.
func axpyF32AVX512(nk int) {
	name := fmt.Sprintf("axpyF32AVX512k%d", nk)
	sig := "func(pv *float32, p *float32"
	for j := range nk {
		sig += fmt.Sprintf(", k%d", j)
	}
	sig += " *float32, n int)"
	TEXT(name, NOSPLIT, sig)
	Doc(fmt.Sprintf("%s adds p[j]·k_j[i] to pv[i] for the %d keys in order (f32 FMAs, 16 lanes), n a multiple of 8.", name, nk))
	pv := Load(Param("pv"), GP64())
	pp := Load(Param("p"), GP64())
	ks := []reg.Register{}
	for j := range nk {
		ks = append(ks, Load(Param(fmt.Sprintf("k%d", j)), GP64()))
	}
	n := Load(Param("n"), GP64())
	pb := make([]reg.VecVirtual, nk)
	for j := range pb {
		pb[j] = ZMM()
		VBROADCASTSS(Mem{Base: pp, Disp: 4 * j}, pb[j])
	}
	i := GP64()
	XORQ(i, i)
	const unroll = 4
	n4 := GP64()
	MOVQ(n, n4)
	SHRQ(Imm(6), n4) // 64 = 16·unroll floats per iteration
	SHLQ(Imm(6), n4)
	n1 := GP64()
	MOVQ(n, n1)
	SHRQ(Imm(4), n1)
	SHLQ(Imm(4), n1)
	CMPQ(n4, Imm(0))
	JE(LabelRef(name + "_tail"))
	Label(name + "_loop")
	acc := make([]reg.VecVirtual, unroll)
	for u := range acc {
		acc[u] = ZMM()
		VMOVUPS(Mem{Base: pv, Index: i, Scale: 4, Disp: 64 * u}, acc[u])
	}
	for j, kp := range ks {
		for u := range acc {
			VFMADD231PS(Mem{Base: kp, Index: i, Scale: 4, Disp: 64 * u}, pb[j], acc[u])
		}
	}
	for u := range acc {
		VMOVUPS(acc[u], Mem{Base: pv, Index: i, Scale: 4, Disp: 64 * u})
	}
	ADDQ(Imm(16*unroll), i)
	CMPQ(i, n4)
	JNE(LabelRef(name + "_loop"))
	Label(name + "_tail")
	CMPQ(i, n1)
	JE(LabelRef(name + "_ytail"))
	a := ZMM()
	VMOVUPS(Mem{Base: pv, Index: i, Scale: 4}, a)
	for j, kp := range ks {
		VFMADD231PS(Mem{Base: kp, Index: i, Scale: 4}, pb[j], a)
	}
	VMOVUPS(a, Mem{Base: pv, Index: i, Scale: 4})
	ADDQ(Imm(16), i)
	JMP(LabelRef(name + "_tail"))
	Label(name + "_ytail")
	CMPQ(i, n)
	JE(LabelRef(name + "_done"))
	y := YMM()
	VMOVUPS(Mem{Base: pv, Index: i, Scale: 4}, y)
	for j, kp := range ks {
		pj := YMM()
		VBROADCASTSS(Mem{Base: pp, Disp: 4 * j}, pj)
		VFMADD231PS(Mem{Base: kp, Index: i, Scale: 4}, pj, y)
	}
	VMOVUPS(y, Mem{Base: pv, Index: i, Scale: 4})
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// axpyHeadsF32AVX512 emits axpyHeadsF32AVX512k4: the P·V terms of 4 keys
// for several heads at once (pv_h[i] = fma(p[4h+3], k3[i], … fma(p[4h],
// k0[i], pv_h[i])) for the heads h = hs[0..nh-1], pv_h at pv + h·ldpv, i <
// n, a multiple of 64). Per 64 columns the keys' 16 vectors stay in
// registers while each head's row goes through; every element sees the
// FMAs of axpyF32AVX2k4, so the same bits.
func axpyHeadsF32AVX512() {
	name := "axpyHeadsF32AVX512k4"
	TEXT(name, NOSPLIT, "func(pv *float32, ldpv int, p *float32, hs *int32, nh int, k0, k1, k2, k3 *float32, n int)")
	Doc(name + " adds p[4h+j]·k_j[i] to pv[h*ldpv+i] for the 4 keys in order (f32 FMAs) and the heads h = hs[x], x < nh; n a multiple of 64.")
	pv := Load(Param("pv"), GP64())
	ldpv := Load(Param("ldpv"), GP64())
	SHLQ(Imm(2), ldpv)
	pp := Load(Param("p"), GP64())
	hs := Load(Param("hs"), GP64())
	nh := Load(Param("nh"), GP64())
	ks := []reg.Register{}
	for j := range 4 {
		ks = append(ks, Load(Param(fmt.Sprintf("k%d", j)), GP64()))
	}
	n := Load(Param("n"), GP64())
	i := GP64()
	XORQ(i, i)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	TESTQ(nh, nh)
	JZ(LabelRef(name + "_done"))
	Label(name + "_chunk")
	kv := make([][]reg.VecVirtual, 4)
	for j, kp := range ks {
		for u := range 4 {
			x := ZMM()
			VMOVUPS(Mem{Base: kp, Index: i, Scale: 4, Disp: 64 * u}, x)
			kv[j] = append(kv[j], x)
		}
	}
	x := GP64()
	XORQ(x, x)
	Label(name + "_head")
	hh := GP64()
	MOVLQSX(Mem{Base: hs, Index: x, Scale: 4}, hh)
	row := GP64()
	MOVQ(hh, row)
	IMULQ(ldpv, row)
	ADDQ(pv, row)
	SHLQ(Imm(4), hh) // 4 floats of p per head
	ADDQ(pp, hh)
	pb := make([]reg.VecVirtual, 4)
	for j := range pb {
		pb[j] = ZMM()
		VBROADCASTSS(Mem{Base: hh, Disp: 4 * j}, pb[j])
	}
	acc := make([]reg.VecVirtual, 4)
	for u := range acc {
		acc[u] = ZMM()
		VMOVUPS(Mem{Base: row, Index: i, Scale: 4, Disp: 64 * u}, acc[u])
	}
	for j := range 4 {
		for u := range acc {
			VFMADD231PS(kv[j][u], pb[j], acc[u])
		}
	}
	for u := range acc {
		VMOVUPS(acc[u], Mem{Base: row, Index: i, Scale: 4, Disp: 64 * u})
	}
	INCQ(x)
	CMPQ(x, nh)
	JNE(LabelRef(name + "_head"))
	ADDQ(Imm(64), i)
	CMPQ(i, n)
	JB(LabelRef(name + "_chunk"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// qkF32AVX512k8 emits qkF32AVX512h16k8: qkF32AVX2g2k4's logits (16 heads
// in lanes, one f32 FMA chain each over i) for 8 keys, one zmm per key:
// the same bits per head and key.
func qkF32AVX512k8() {
	name := "qkF32AVX512h16k8"
	const nk = 8
	sig := "func(qT *float32, ldq int"
	for j := range nk {
		sig += fmt.Sprintf(", k%d", j)
	}
	sig += " *float32, n int, out *float32)"
	TEXT(name, NOSPLIT, sig)
	Doc(name + " sets out[j*16+h] = Σ_i qT[i*ldq+h]·k_j[i] (one f32 FMA chain in i) for h < 16 and the 8 keys k_j.")
	q := Load(Param("qT"), GP64())
	ldq := Load(Param("ldq"), GP64())
	ks := []reg.Register{}
	for j := range nk {
		ks = append(ks, Load(Param(fmt.Sprintf("k%d", j)), GP64()))
	}
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), ldq)
	acc := make([]reg.VecVirtual, nk)
	for j := range acc {
		acc[j] = ZMM()
		VPXORD(acc[j], acc[j], acc[j])
	}
	i := GP64()
	XORQ(i, i)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	qv := ZMM()
	VMOVUPS(Mem{Base: q}, qv)
	for j, kp := range ks {
		kb := ZMM()
		VBROADCASTSS(Mem{Base: kp, Index: i, Scale: 4}, kb)
		VFMADD231PS(qv, kb, acc[j])
	}
	ADDQ(ldq, q)
	INCQ(i)
	CMPQ(i, n)
	JNE(LabelRef(name + "_loop"))
	Label(name + "_done")
	o := Load(Param("out"), GP64())
	for j, a := range acc {
		VMOVUPS(a, Mem{Base: o, Disp: 64 * j})
	}
	VZEROUPPER()
	RET()
}

// eachVector emits the loop of the elementwise kernels: n (a count of
// floats, a multiple of 8) becomes a count of 8-float vectors, body runs
// once per vector, and each pointer of ptrs then moves on by 32 bytes.
func eachVector(name string, n reg.Register, ptrs []reg.Register, body func()) {
	SHRQ(Imm(3), n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	body()
	for _, p := range ptrs {
		ADDQ(Imm(32), p)
	}
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// bf16Round rounds the 8 floats of x to bfloat16 in place as numfmt.BF16Round
// does: ties to even on the bit pattern, NaN kept a NaN with its top
// mantissa bit set (c: 0x7FFF, 1, 0xFFFF0000, 0x7F800000, 0x00400000).
type bf16Consts struct{ r7fff, one, hi, inf, quiet, abs reg.VecVirtual }

func newBF16Consts() bf16Consts {
	return bf16Consts{constVec(0x7FFF, false), constVec(1, false), constVec(0xFFFF0000, false),
		constVec(0x7F800000, false), constVec(0x00400000, false), constVec(0x7FFFFFFF, false)}
}

func bf16Round(x reg.VecVirtual, c bf16Consts) {
	odd, r, nan := YMM(), YMM(), YMM()
	VPSRLD(Imm(16), x, odd)
	VPAND(c.one, odd, odd)
	VPADDD(c.r7fff, x, r)
	VPADDD(odd, r, r)
	VPAND(c.abs, x, nan)
	VPCMPGTD(c.inf, nan, nan) // |bits| > 0x7F800000: NaN
	q := YMM()
	VPOR(c.quiet, x, q)
	VPBLENDVB(nan, q, r, r)
	VPAND(c.hi, r, x)
}

// bf16RoundAVX2 emits bf16RoundAVX2: numfmt.BF16RoundSlice on n floats (a
// multiple of 8) in place.
func bf16RoundAVX2() {
	name := "bf16RoundAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, n int)")
	Doc(name + " rounds x[i] to bfloat16 in place for i < n (a multiple of 8), as numfmt.BF16Round.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	c := newBF16Consts()
	eachVector(name, n, []reg.Register{x}, func() {
		v := YMM()
		VMOVUPS(Mem{Base: x}, v)
		bf16Round(v, c)
		VMOVUPS(v, Mem{Base: x})
	})
}

// swigluGateAVX2 emits swigluGateAVX2: x = −min(g, limit) (Go's min: a NaN
// g stays NaN; limit +Inf for no clamp) for n floats (a multiple of 8).
func swigluGateAVX2() {
	name := "swigluGateAVX2"
	TEXT(name, NOSPLIT, "func(x, gate *float32, n int, limit float32)")
	Doc(name + " sets x[i] = −min(gate[i], limit) for i < n (a multiple of 8).")
	x := Load(Param("x"), GP64())
	g := Load(Param("gate"), GP64()) // ("g" is a register name in Go assembly)
	n := Load(Param("n"), GP64())
	lim := YMM()
	VBROADCASTSS(Load(Param("limit"), XMM()), lim)
	sign := constVec(0x80000000, false)
	eachVector(name, n, []reg.Register{x, g}, func() {
		v := YMM()
		// MINPS returns its second source when either is NaN: min(g, limit)
		// with g's NaN kept is (limit < g ? limit : g)
		VMINPS(Mem{Base: g}, lim, v)
		VXORPS(sign, v, v)
		VMOVUPS(v, Mem{Base: x})
	})
}

// swigluElemAVX2 emits swigluElemAVX2: kernels.SwiGLUElement in lanes,
// out = bf16(w·((gv/(1+e))·clamp(u, ±limit))) with gv = −x, every step the
// same fp32 operation (limit +Inf for no clamp, w = 1 for no weight).
func swigluElemAVX2() {
	name := "swigluElemAVX2"
	TEXT(name, NOSPLIT, "func(out, x, e, u *float32, n int, limit, w float32)")
	Doc(name + " sets out[i] = bf16(w·(−x[i]/(1+e[i])·clamp(u[i], ±limit))) for i < n (a multiple of 8).")
	o := Load(Param("out"), GP64())
	x := Load(Param("x"), GP64())
	e := Load(Param("e"), GP64())
	u := Load(Param("u"), GP64())
	n := Load(Param("n"), GP64())
	lim, nlim, wv := YMM(), YMM(), YMM()
	VBROADCASTSS(Load(Param("limit"), XMM()), lim)
	VBROADCASTSS(Load(Param("w"), XMM()), wv)
	sign := constVec(0x80000000, false)
	VXORPS(sign, lim, nlim)
	one := constVec(0x3F800000, false)
	c := newBF16Consts()
	eachVector(name, n, []reg.Register{o, x, e, u}, func() {
		gv, d, uv := YMM(), YMM(), YMM()
		VXORPS(Mem{Base: x}, sign, gv)
		VADDPS(Mem{Base: e}, one, d)
		VDIVPS(d, gv, gv)
		VMINPS(Mem{Base: u}, lim, uv) // min(u, limit), u's NaN kept
		VMAXPS(uv, nlim, uv)          // max(., −limit), NaN kept
		VMULPS(uv, gv, gv)
		VMULPS(wv, gv, gv)
		bf16Round(gv, c)
		VMOVUPS(gv, Mem{Base: o})
	})
}

// squaresAVX2 emits squaresAVX2: dst[i] = x[i]·x[i] (fp32) for n floats (a
// multiple of 8).
func squaresAVX2() {
	name := "squaresAVX2"
	TEXT(name, NOSPLIT, "func(dst, x *float32, n int)")
	Doc(name + " sets dst[i] = x[i]·x[i] for i < n (a multiple of 8).")
	d := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	eachVector(name, n, []reg.Register{x, d}, func() {
		v := YMM()
		VMOVUPS(Mem{Base: x}, v)
		VMULPS(v, v, v)
		VMOVUPS(v, Mem{Base: d})
	})
}

// addRows32AVX2 emits addRows32AVX2: acc[l] += x[r*32+l] for the rows r <
// rows in order, lane by lane (the row additions of torch's cascade sum).
func addRows32AVX2() {
	name := "addRows32AVX2"
	TEXT(name, NOSPLIT, "func(acc, x *float32, rows int)")
	Doc(name + " adds the rows of x [rows][32] to acc [32] in order, lane-wise (fp32).")
	ap := Load(Param("acc"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("rows"), GP64())
	a := make([]reg.VecVirtual, 4)
	for i := range a {
		a[i] = YMM()
		VMOVUPS(Mem{Base: ap, Disp: 32 * i}, a[i])
	}
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for i := range a {
		VADDPS(Mem{Base: x, Disp: 32 * i}, a[i], a[i]) // a + x, a the first operand as in Go's a += x
	}
	ADDQ(U32(128), x)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	for i := range a {
		VMOVUPS(a[i], Mem{Base: ap, Disp: 32 * i})
	}
	VZEROUPPER()
	RET()
}

// rmsOutAVX2 emits rmsOutAVX2: out[i] = bf16(w[i]·(x[i]·rs)), RMSNorm's
// output step, for n floats (a multiple of 8).
func rmsOutAVX2() {
	name := "rmsOutAVX2"
	TEXT(name, NOSPLIT, "func(out, x, w *float32, n int, rs float32)")
	Doc(name + " sets out[i] = bf16(w[i]·(x[i]·rs)) for i < n (a multiple of 8).")
	o := Load(Param("out"), GP64())
	x := Load(Param("x"), GP64())
	w := Load(Param("w"), GP64())
	n := Load(Param("n"), GP64())
	r := YMM()
	VBROADCASTSS(Load(Param("rs"), XMM()), r)
	c := newBF16Consts()
	eachVector(name, n, []reg.Register{o, x, w}, func() {
		v, wv := YMM(), YMM()
		VMULPS(Mem{Base: x}, r, v) // (x·rs: Go's v*rs with x first; same value)
		VMOVUPS(Mem{Base: w}, wv)
		VMULPS(v, wv, v)
		bf16Round(v, c)
		VMOVUPS(v, Mem{Base: o})
	})
}

// sinkhornIters8AVX2 emits sinkhornIters8AVX2: the Sinkhorn iterations of
// fast.HCSplitSinkhorn4 for 8 tokens in the lanes (c[e*8+t]: element e =
// 4·row + column of token t's 4×4 matrix, in memory): iters times the
// columns, each but the first time after the rows; a row or column is
// divided by (its sum from +0 in ascending order + eps), norm4's fp32
// operations in its order.
func sinkhornIters8AVX2() {
	name := "sinkhornIters8AVX2"
	TEXT(name, NOSPLIT, "func(c *float32, iters int, eps float32)")
	Doc(name + " runs HCSplitSinkhorn4's iters row and column normalisations of 8 tokens' 4×4 matrices in lanes (c[e*8+t], e = 4·row + column).")
	c := Load(Param("c"), GP64())
	iters := Load(Param("iters"), GP64())
	eps := YMM()
	VBROADCASTSS(Load(Param("eps"), XMM()), eps)
	zero := YMM()
	VXORPS(zero, zero, zero)
	at := func(e int) Mem { return Mem{Base: c, Disp: 32 * e} }
	norm := func(e [4]int) {
		sum, q := YMM(), YMM()
		VADDPS(at(e[0]), zero, sum) // (from +0: -0 + 0 = +0, as s += a)
		for _, x := range e[1:] {
			VADDPS(at(x), sum, sum)
		}
		VADDPS(eps, sum, q)
		for _, x := range e {
			v := YMM()
			VMOVUPS(at(x), v)
			VDIVPS(q, v, v)
			VMOVUPS(v, at(x))
		}
	}
	cols := func() {
		for col := range 4 {
			norm([4]int{col, 4 + col, 8 + col, 12 + col})
		}
	}
	TESTQ(iters, iters)
	JZ(LabelRef(name + "_done"))
	cols()
	DECQ(iters)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for row := range 4 {
		norm([4]int{4 * row, 4*row + 1, 4*row + 2, 4*row + 3})
	}
	cols()
	DECQ(iters)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// hcSum4AVX2 emits hcSum4AVX2 (post false: HCPre's sum) or hcPost4AVX2:
// s = (((0 + c0·r0) + c1·r1) + c2·r2) + c3·r3 per element, every product
// and sum rounded to fp32 as the reference's loop does, then out =
// bf16(s), or bf16(p·y + s) for HCPost. n is a multiple of 8.
func hcSum4AVX2(post bool) {
	name := "hcSum4AVX2"
	sig := "func(out, r0, r1, r2, r3 *float32, n int, c *[4]float32)"
	if post {
		name = "hcPost4AVX2"
		sig = "func(out, r0, r1, r2, r3 *float32, n int, c *[4]float32, y *float32, p float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Doc(name + " sets out[d] = bf16([p·y[d] +] Σ_i c[i]·r_i[d]) (fp32, i ascending from +0) for d < n (a multiple of 8).")
	o := Load(Param("out"), GP64())
	rs := []reg.Register{Load(Param("r0"), GP64()), Load(Param("r1"), GP64()), Load(Param("r2"), GP64()), Load(Param("r3"), GP64())}
	n := Load(Param("n"), GP64())
	cp := Load(Param("c"), GP64())
	cv := make([]reg.VecVirtual, 4)
	for i := range cv {
		cv[i] = YMM()
		VBROADCASTSS(Mem{Base: cp, Disp: 4 * i}, cv[i])
	}
	var y reg.Register
	pv := YMM()
	if post {
		y = Load(Param("y"), GP64())
		VBROADCASTSS(Load(Param("p"), XMM()), pv)
	}
	c := newBF16Consts()
	i := GP64() // byte offset of the vector in every row
	XORQ(i, i)
	eachVector(name, n, []reg.Register{i}, func() {
		sv := YMM()
		VXORPS(sv, sv, sv)
		for k := range 4 {
			t := YMM()
			VMULPS(Mem{Base: rs[k], Index: i, Scale: 1}, cv[k], t) // c·r
			VADDPS(t, sv, sv)                                      // s + c·r
		}
		if post {
			t := YMM()
			VMULPS(Mem{Base: y, Index: i, Scale: 1}, pv, t) // p·y
			VADDPS(sv, t, sv)                               // p·y + s
		}
		bf16Round(sv, c)
		VMOVUPS(sv, Mem{Base: o, Index: i, Scale: 1})
	})
}

// scaleAddAVX2 emits scaleAddAVX2: acc[i] = fl(acc[i]·alpha) + pv[i], the
// attention's rescaling of its running output (two roundings, no FMA).
func scaleAddAVX2() {
	name := "scaleAddAVX2"
	TEXT(name, NOSPLIT, "func(acc, pv *float32, n int, alpha float32)")
	Doc(name + " sets acc[i] = acc[i]·alpha + pv[i] (each step rounded to fp32) for i < n (a multiple of 8).")
	acc := Load(Param("acc"), GP64())
	pv := Load(Param("pv"), GP64())
	n := Load(Param("n"), GP64())
	al := YMM()
	VBROADCASTSS(Load(Param("alpha"), XMM()), al)
	eachVector(name, n, []reg.Register{acc, pv}, func() {
		v := YMM()
		VMOVUPS(Mem{Base: acc}, v)
		VMULPS(al, v, v)            // acc·alpha
		VADDPS(Mem{Base: pv}, v, v) // + pv
		VMOVUPS(v, Mem{Base: acc})
	})
}

// indexTermsAVX2 emits indexTermsAVX2: the per-head terms of the indexer
// score, t = bf16(relu(bf16(e))·w) (relu maps −0 to +0 and keeps NaN, as
// the reference's "if ev <= 0 { ev = 0 }"), for nk keys of h heads (h a
// multiple of 8; e and t are [nk][h], w is [h]).
func indexTermsAVX2() {
	name := "indexTermsAVX2"
	TEXT(name, NOSPLIT, "func(t, e, w *float32, h, nk int)")
	Doc(name + " sets t[j*h+i] = bf16(relu(bf16(e[j*h+i]))·w[i]) for j < nk, i < h (a multiple of 8).")
	tp := Load(Param("t"), GP64())
	ep := Load(Param("e"), GP64())
	wp := Load(Param("w"), GP64())
	h := Load(Param("h"), GP64())
	nk := Load(Param("nk"), GP64())
	c := newBF16Consts()
	zero := YMM()
	VXORPS(zero, zero, zero)
	TESTQ(nk, nk)
	JZ(LabelRef(name + "_done"))
	Label(name + "_key")
	i := GP64()
	XORQ(i, i)
	Label(name + "_head")
	v, m, wv := YMM(), YMM(), YMM()
	VMOVUPS(Mem{Base: ep, Index: i, Scale: 4}, v)
	bf16Round(v, c)
	VCMPPS(Imm(2), zero, v, m) // v <= 0 (ordered: NaN false)
	VANDNPS(v, m, v)           // +0 there
	VMOVUPS(Mem{Base: wp, Index: i, Scale: 4}, wv)
	VMULPS(wv, v, v) // ev·w
	bf16Round(v, c)
	VMOVUPS(v, Mem{Base: tp, Index: i, Scale: 4})
	ADDQ(Imm(8), i)
	CMPQ(i, h)
	JB(LabelRef(name + "_head"))
	LEAQ(Mem{Base: ep, Index: h, Scale: 4}, ep)
	LEAQ(Mem{Base: tp, Index: h, Scale: 4}, tp)
	DECQ(nk)
	JNZ(LabelRef(name + "_key"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// absMaxBitsAVX2 emits absMaxBitsAVX2: the largest float32 bit pattern with
// the sign cleared over n (a multiple of 8) elements — max|x| as bits for
// finite x, ≥ 0x7F800000 when an Inf or a NaN is among them.
func absMaxBitsAVX2() {
	name := "absMaxBitsAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, n int) uint32")
	Doc(name + " returns max over i < n (a multiple of 8) of bits(x[i]) &^ 0x80000000.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	abs := constVec(0x7FFFFFFF, false)
	m := YMM()
	VPXOR(m, m, m)
	SHRQ(Imm(3), n)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	v := YMM()
	VPAND(Mem{Base: x}, abs, v)
	VPMAXUD(v, m, m)
	ADDQ(Imm(32), x)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	hi := XMM()
	VEXTRACTI128(Imm(1), m, hi)
	VPMAXUD(hi, m.AsX(), hi)
	t := XMM()
	VPSHUFD(Imm(0x4E), hi, t)
	VPMAXUD(t, hi, hi)
	VPSHUFD(Imm(0xB1), hi, t)
	VPMAXUD(t, hi, hi)
	r := GP32()
	VMOVD(hi, r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// actQuantAVX2 emits actQuantAVX2: numfmt's fast ActQuant body on n (a
// multiple of 8) finite elements of one scale s (r = 1/s, both powers of
// two in the normal range): u = x·r, q = e4m3 round to nearest even of |u|
// (448 from 448 on; the 2^-9 quantum below 2^-6 by adding and removing
// 16384; else 3 mantissa bits rounded on the float32 bits), x = q·s with
// u's sign.
func actQuantAVX2() {
	name := "actQuantAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, n int, r, s float32)")
	Doc(name + " quantises x[:n] (n a multiple of 8) in place to bf16(e4m3(x·r)·s), as numfmt.ActQuant's fast path.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	rv, sv := YMM(), YMM()
	VBROADCASTSS(NewParamAddr("r", 16), rv)
	VBROADCASTSS(NewParamAddr("s", 20), sv)
	signM := constVec(0x80000000, false)
	absM := constVec(0x7FFFFFFF, false)
	maxV := constVec(0x43E00000, false)  // 448
	minN := constVec(0x3C800000, false)  // 2^-6
	magic := constVec(0x46800000, false) // 16384
	rnd := constVec(0x0007FFFF, false)
	one := constVec(0x00000001, false)
	trunc := constVec(0xFFF00000, false)
	SHRQ(Imm(3), n)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	u := YMM()
	VMULPS(Mem{Base: x}, rv, u)
	sign := YMM()
	VANDPS(signM, u, sign)
	a := YMM()
	VANDPS(absM, u, a)
	// normal: bits + 0x7ffff + ((bits >> 20) & 1), low 20 bits cleared
	b := YMM()
	VPSRLD(Imm(20), a, b)
	VPAND(one, b, b)
	VPADDD(rnd, b, b)
	VPADDD(a, b, b)
	VPAND(trunc, b, b)
	// below 2^-6: (a + 16384) − 16384
	sm := YMM()
	VADDPS(magic, a, sm)
	VSUBPS(magic, sm, sm)
	lt := YMM()
	VCMPPS(Imm(1), minN, a, lt) // a < 2^-6
	VBLENDVPS(lt, sm, b, b)
	ge := YMM()
	VCMPPS(Imm(13), maxV, a, ge) // a >= 448
	VBLENDVPS(ge, maxV, b, b)
	VMULPS(sv, b, b)
	VORPS(sign, b, b)
	VMOVUPS(b, Mem{Base: x})
	ADDQ(Imm(32), x)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// lanes4AVX2 emits lanes4AVX2: lanes32AVX2 with 4 lanes (one xmm), for the
// one-token hc mixes spread over the threads as 4-lane panels.
func lanes4AVX2() {
	name := "lanes4AVX2"
	TEXT(name, NOSPLIT, "func(x *float32, p0, p1, p2 *float32, n int, out *float32)")
	Doc(name + " sets out[4k+l] = Σ_d fl(x[d]·p_k[d*4+l]) (sequential in d, from +0) for l < 4 and the three panels p_k (three independent chains).")
	x := Load(Param("x"), GP64())
	ps := []reg.Register{Load(Param("p0"), GP64()), Load(Param("p1"), GP64()), Load(Param("p2"), GP64())}
	n := Load(Param("n"), GP64())
	acc := make([]reg.VecVirtual, len(ps))
	for i := range acc {
		acc[i] = XMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	bx := XMM()
	VBROADCASTSS(Mem{Base: x}, bx)
	for i, p := range ps {
		t := XMM()
		VMULPS(Mem{Base: p}, bx, t)
		VADDPS(t, acc[i], acc[i])
		ADDQ(Imm(16), p)
	}
	ADDQ(Imm(4), x)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	o := Load(Param("out"), GP64())
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: o, Disp: 16 * i})
	}
	RET()
}

// expF32AVX2 emits expF32AVX2: dst[i] = float32(math.Exp(float64(src[i])))
// for i < n (a multiple of 4), four lanes at a time with the operations of
// the Go runtime's archExp in its FMA path (math/exp_amd64.s), so the bits
// are the same: the argument reduced by n = round(x·log2 e) in two FMAs, a
// Taylor polynomial of x/16 by FMAs, four doublings (x·(x+2)), the last
// fused with the +1, and the scaling by 2^n on the exponent bits. Lanes
// below −700 (−Inf included) give 0, as float32(math.Exp) does there; lanes
// above 700 or NaN are not handled: the kernel returns nonzero and the
// caller redoes the slice with math.Exp. c holds the constants, each
// repeated 4 times (expConsts).
func expF32AVX2() {
	name := "expF32AVX2"
	TEXT(name, NOSPLIT, "func(dst *float32, src *float32, n int, c *float64) (bad uint32)")
	Doc(name + " sets dst[i] = float32(math.Exp(float64(src[i]))) for i < n (a multiple of 4); bad ≠ 0 when some src[i] > 700 or is NaN (dst is then partly wrong).")
	d := Load(Param("dst"), GP64())
	sp := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	c := Load(Param("c"), GP64())
	k := func(i int) Mem { return Mem{Base: c, Disp: 32 * i} }
	// c: 0 LOG2E, 1 LN2U, 2 LN2L, 3 1/16, 4 c64, 5 c56, 6 c48, 7 c40, 8 c32,
	// 9 c24, 10 0.5, 11 1.0, 12 2.0, 13 700, 14 −700, 15 bias 1023 (int64 lanes)
	bad := YMM()
	VXORPD(bad, bad, bad)
	SHRQ(Imm(2), n)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	x := YMM()
	VCVTPS2PD(Mem{Base: sp}, x)
	a := YMM()
	VCMPPD(Imm(6), k(13), x, a) // NLE_UQ: x > 700 or NaN
	VORPD(a, bad, bad)
	lo := YMM()
	VCMPPD(Imm(1), k(14), x, lo) // LT_OS: x < −700 (−Inf too): the result is 0
	t := YMM()
	VMULPD(k(0), x, t)
	ni := XMM()
	VCVTPD2DQY(t, ni)
	nf := YMM()
	VCVTDQ2PD(ni, nf)
	VFNMADD231PD(k(1), nf, x) // x −= nf·LN2U
	VFNMADD231PD(k(2), nf, x) // x −= nf·LN2L
	VMULPD(k(3), x, x)
	p := YMM()
	VMOVUPD(k(4), p)
	for i := 5; i <= 11; i++ {
		VFMADD213PD(k(i), x, p) // p = p·x + c
	}
	VMULPD(p, x, x)
	for range 3 {
		VADDPD(k(12), x, t)
		VMULPD(t, x, x)
	}
	VADDPD(k(12), x, t)
	VFMADD213PD(k(11), t, x) // x = x·t + 1
	// × 2^n: (n + 1023) << 52 as float64 bits
	e := YMM()
	VPMOVSXDQ(ni, e)
	VPADDQ(k(15), e, e)
	VPSLLQ(Imm(52), e, e)
	VMULPD(e, x, x)
	VANDNPD(x, lo, x)
	r := XMM()
	VCVTPD2PSY(x, r)
	VMOVUPS(r, Mem{Base: d})
	ADDQ(Imm(16), sp)
	ADDQ(Imm(16), d)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	rr := GP32()
	VMOVMSKPD(bad, rr)
	Store(rr, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// transpose8 transposes the 8×8 f32 matrix whose rows are r, passing each
// column d to use as soon as it is formed.
func transpose8(r []reg.VecVirtual, use func(d int, c reg.VecVirtual)) {
	t := make([]reg.VecVirtual, 8)
	for i := 0; i < 4; i++ {
		t[2*i], t[2*i+1] = YMM(), YMM()
		VUNPCKLPS(r[2*i+1], r[2*i], t[2*i])
		VUNPCKHPS(r[2*i+1], r[2*i], t[2*i+1])
	}
	u := make([]reg.VecVirtual, 8)
	for h := 0; h < 2; h++ {
		a0, a1, b0, b1 := t[4*h], t[4*h+1], t[4*h+2], t[4*h+3]
		for i := range 4 {
			u[4*h+i] = YMM()
		}
		VSHUFPS(Imm(0x44), b0, a0, u[4*h])
		VSHUFPS(Imm(0xEE), b0, a0, u[4*h+1])
		VSHUFPS(Imm(0x44), b1, a1, u[4*h+2])
		VSHUFPS(Imm(0xEE), b1, a1, u[4*h+3])
	}
	for d := 0; d < 8; d++ {
		c := YMM()
		if d < 4 {
			VPERM2F128(Imm(0x20), u[4+d], u[d], c)
		} else {
			VPERM2F128(Imm(0x31), u[d], u[d-4], c)
		}
		use(d, c)
	}
}

// pack8AVX2 emits pack<kind>x8AVX2: it dequantises 8 weight rows (row l at
// w + l*ldw bytes) over nb 32-blocks (kinds FP8, FP4: block scales folded
// in, exact) or nb 8-groups (BF16) and stores them transposed: the 8
// values of k index c at dst[c*ldd : c*ldd+8]. FP8 rows share the scale
// bytes s (one per block, each in 0..134 and no NaN code); FP4 row l has its
// scale bytes at s[l*lds:] (looked up in the f32 table sc; c points to the
// e2m1 magnitude table).
func pack8AVX2(kind string) {
	name := "pack" + kind + "x8AVX2"
	TEXT(name, NOSPLIT, "func(dst *float32, ldd int, w *byte, ldw int, s *byte, lds int, nb int, sc *float32, c *float32)")
	Doc(name + " dequantises 8 weight rows and stores them transposed (see asmgen).")
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	w := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	nb := Load(Param("nb"), GP64())
	SHLQ(Imm(2), ldd)
	ld3, ld5, ld7 := GP64(), GP64(), GP64()
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 2}, ld3)
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 4}, ld5)
	LEAQ(Mem{Base: ld3, Index: ldw, Scale: 4}, ld7)
	rowMem := func(l, disp int) Mem {
		switch l {
		case 0:
			return Mem{Base: w, Disp: disp}
		case 1:
			return Mem{Base: w, Index: ldw, Scale: 1, Disp: disp}
		case 2:
			return Mem{Base: w, Index: ldw, Scale: 2, Disp: disp}
		case 3:
			return Mem{Base: w, Index: ld3, Scale: 1, Disp: disp}
		case 4:
			return Mem{Base: w, Index: ldw, Scale: 4, Disp: disp}
		case 5:
			return Mem{Base: w, Index: ld5, Scale: 1, Disp: disp}
		case 6:
			return Mem{Base: w, Index: ld3, Scale: 2, Disp: disp}
		}
		return Mem{Base: w, Index: ld7, Scale: 1, Disp: disp}
	}
	local := AllocLocal(256)
	groups, wstep := 1, 0 // 8-groups per loop iteration, bytes of w per iteration
	var s, lds, sc, mask, tab, shifts, sign reg.Register
	switch kind {
	case "FP8":
		groups, wstep = 4, 32
		s = Load(Param("s"), GP64())
		mask = constVec(0x87F00000, false)
	case "FP4":
		groups, wstep = 4, 16
		s = Load(Param("s"), GP64())
		lds = Load(Param("lds"), GP64())
		sc = Load(Param("sc"), GP64())
		cp := Load(Param("c"), GP64())
		tab = YMM()
		VMOVUPS(Mem{Base: cp}, tab)
		shifts = YMM()
		VMOVDQU(Mem{Base: cp, Disp: 32}, shifts)
		sign = constVec(0x80000000, false)
	case "BF16":
		wstep = 16
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	var f reg.VecVirtual
	switch kind {
	case "FP8":
		f = YMM()
		scaleFactor(s, 120, f, false)
	case "FP4":
		// per-row factors of the block, s[l*lds], kept on the stack
		sl := GP64()
		MOVQ(s, sl)
		for l := 0; l < 8; l++ {
			fl := YMM()
			e := GP64()
			MOVBQZX(Mem{Base: sl}, e)
			VBROADCASTSS(Mem{Base: sc, Index: e, Scale: 4}, fl)
			VMOVUPS(fl, local.Offset(32*l))
			if l < 7 {
				ADDQ(lds, sl)
			}
		}
	}
	for q := 0; q < groups; q++ {
		r := make([]reg.VecVirtual, 8)
		for l := range r {
			r[l] = YMM()
			switch kind {
			case "FP8":
				VPMOVSXBD(rowMem(l, 8*q), r[l])
				VPSLLD(Imm(20), r[l], r[l])
				VPAND(mask, r[l], r[l])
				VMULPS(f, r[l], r[l])
			case "FP4":
				x, sg := YMM(), YMM()
				VPBROADCASTD(rowMem(l, 4*q), x)
				VPSRLVD(shifts, x, x)
				VPERMPS(tab, x, r[l])
				VPSLLD(Imm(28), x, sg)
				VPAND(sign, sg, sg)
				VXORPS(sg, r[l], r[l])
				VMULPS(local.Offset(32*l), r[l], r[l])
			case "BF16":
				VPMOVZXWD(rowMem(l, 0), r[l])
				VPSLLD(Imm(16), r[l], r[l])
			}
		}
		transpose8(r, func(_ int, c reg.VecVirtual) {
			VMOVUPS(c, Mem{Base: dst})
			ADDQ(ldd, dst)
		})
	}
	ADDQ(U32(wstep), w)
	switch kind {
	case "FP8", "FP4":
		INCQ(s)
	}
	DECQ(nb)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
