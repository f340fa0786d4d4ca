// Command asmgen generates the amd64 assembly kernels of package fast with
// avo (github.com/mmcloughlin/avo). Run it through go generate in the fast
// package:
//
//	go run ./asmgen -out kernels_amd64.s -stubs kernels_amd64.go -pkg fast
//
// Kernels (all operate on float32, x86-64 ABI0 stubs):
//
//	gemm{AVX512,AVX2}(ap, bp, c *float32, ldc, kc int)
//	    C[i*ldc+j] += Σ_kk ap[kk*MR+i]·bp[kk*NR+j] for i < MR, j < NR
//	    (MR×NR = 12×32 for AVX-512, 6×16 for AVX2)
//	dotF32{AVX512,AVX2}(a, b *float32, n int) float32
//	    Σ a[i]·b[i] for n a multiple of the vector width
//	dotFP8{AVX512,AVX2}(a *float32, w, s *byte, nb int) (sum float32, nan uint32)
//	    nb 32-blocks of e4m3 codes w with e8m0 scale bytes s (one per block,
//	    each ≤ 134); nan ≠ 0 when a NaN code (0x7F/0xFF) was met
//	dotFP4{AVX512,AVX2}(a *float32, w, s *byte, nb int, tab *float32) float32
//	    nb 32-blocks of packed e2m1 (16 bytes each) with e8m0 scale bytes s
//	    (1..254); a is permuted so that each vector-pair of activations holds
//	    the even elements first, then the odd ones
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	gemm("gemmAVX512", 12, 2, 64, true)
	gemm("gemmAVX2", 6, 2, 32, false)
	dotF32("dotF32AVX512", 64, true)
	dotF32("dotF32AVX2", 32, false)
	dotFP8AVX512()
	dotFP8AVX2()
	dotFP4AVX512()
	dotFP4AVX2()
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
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	for v := range b {
		VMOVUPS(Mem{Base: bp, Disp: v * vb}, b[v])
	}
	var bc reg.VecVirtual
	if !avx512 {
		bc = vec(false)
	}
	for i := 0; i < mr; i++ {
		m := Mem{Base: ap, Disp: 4 * i}
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
