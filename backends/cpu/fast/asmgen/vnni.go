package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// vpdpwssd emits VPDPWSSD src2, src1, dst (AVX-512 VNNI: dst += the
// pairwise sums of the signed word products of src1 and src2 in each dword,
// without saturation), which avo v0.5 does not know.
func vpdpwssd(src2 Op, src1, dst reg.VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPWSSD",
		Operands: []Op{src2, src1, dst},
		Inputs:   []Op{src2, src1, dst},
		Outputs:  []Op{dst},
		ISA:      []string{"AVX512_VNNI"},
	})
}

// gemvFP4QVNNI emits gemvFP4QVNNIx<r>, r even: gemvFP4QAVX2x<r>'s result
// bit for bit with two activation rows in each zmm, on activation rows
// packed in pairs (see pairFP4Q): per 64-element chunk, rows 2p and 2p+1
// hold 320 bytes at a + 2p·lda + 320·chunk, each of the row's four 32-byte
// word vectors v0..v3 beside the other row's ([v_2p | v_2p+1] at 64v) and
// then both rows' 8 chunk factors (at 256).
//
// The chunk's 32 code bytes are broadcast to both halves of a zmm; two
// VPSHUFB controls place code byte 2i (resp. 2i+1) of each 128-bit lane as
// the high byte of word i in both halves, and VPERMB of the 2·e2m1 table
// (as gemvFP4QAVX512) gives the weight words of v0 | v0 and v1 | v1, after
// VPSRLW 4 those of v2 | v2 and v3 | v3. Per row pair one VPMADDWD and
// three VPDPWSSD sum the products of each of the 16 dwords exactly (the
// AVX2 kernel's 8 dword sums of each row, at most 8 products of < 2^27
// each), and one conversion, one multiply by the rows' chunk factors and
// one FMA with the blocks' e8m0 factors do both rows' float steps: the
// AVX2 kernel's steps lane for lane. At the end of a weight row each half
// of a pair's accumulator is reduced as storeRowSums does. c points to 3
// 64-byte constants: the table and the two VPSHUFB controls.
func gemvFP4QVNNI(r int) {
	if r%2 != 0 || r > 16 {
		panic("gemvFP4QVNNI: r must be even, ≤ 16")
	}
	np := r / 2
	name := fmt.Sprintf("gemvFP4QVNNIx%d", r)
	TEXT(name, NOSPLIT, "func(a *byte, lda int, w, s *byte, nb, rows int, out *float32, ldo int, sc *float32, c *byte)")
	Doc(fmt.Sprintf("%s is gemvFP4QAVX2x%d (the same result bit for bit) on %d packed int16 activation rows interleaved in pairs, two rows a zmm (AVX-512 VNNI).", name, r, r))
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	w := Load(Param("w"), GP64())
	s := Load(Param("s"), GP64())
	rows := Load(Param("rows"), GP64())
	o := Load(Param("out"), GP64())
	sc := Load(Param("sc"), GP64())
	tab, ctlA, ctlB := fp4QVNNIConsts(Load(Param("c"), GP64()))
	SHLQ(Imm(1), lda) // the stride of a pair
	ac := GP64()
	pairMemLo := activationRows(ac, lda, min(np, 4))
	var ac4 reg.GPVirtual
	var pairMemHi func(i, disp int) Mem
	if np > 4 {
		ac4 = GP64()
		pairMemHi = activationRows(ac4, lda, np-4)
	}
	pairMem := func(p, disp int) Mem {
		if p < 4 {
			return pairMemLo(p, disp)
		}
		return pairMemHi(p-4, disp)
	}
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Label(name + "_row")
	MOVQ(a, ac)
	if np > 4 {
		LEAQ(Mem{Base: a, Index: lda, Scale: 4}, ac4)
	}
	nb := Load(Param("nb"), GP64())
	acc := make([]reg.VecVirtual, np)
	for p := range acc {
		acc[p] = ZMM()
		VPXORD(acc[p], acc[p], acc[p])
	}
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for u := 0; u < 2; u++ {
		if u == 0 {
			prefetch(w)
		}
		wv, f := fp4QVNNIWeights(w, s, sc, tab, ctlA, ctlB)
		// each pair's sums one VPMADDWD and three VPDPWSSD, issued a word
		// vector at a time for all pairs (the pairs' chains interleaved)
		q := make([]reg.VecVirtual, np)
		for p := range q {
			q[p] = ZMM()
			VPMADDWD(pairMem(p, 0), wv[0], q[p])
		}
		for v := 1; v < 4; v++ {
			for p := range q {
				vpdpwssd(pairMem(p, 64*v), wv[v], q[p])
			}
		}
		for p := range q {
			VCVTDQ2PS(q[p], q[p])
			VMULPS(pairMem(p, 256), q[p], q[p])
			VFMADD231PS(f, q[p], acc[p])
		}
		ADDQ(U32(320), ac)
		if np > 4 {
			ADDQ(U32(320), ac4)
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
	ldo := Load(Param("ldo"), GP64())
	SHLQ(Imm(2), ldo)
	oi := GP64()
	MOVQ(o, oi)
	for p := range acc {
		hi := YMM()
		VEXTRACTF64X4(Imm(1), acc[p], hi)
		storeSumEVEX(acc[p].AsY().(reg.VecVirtual), Mem{Base: oi})
		ADDQ(ldo, oi)
		storeSumEVEX(hi, Mem{Base: oi})
		if p+1 < np {
			ADDQ(ldo, oi)
		}
	}
	ADDQ(Imm(4), o)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fp4QVNNIConsts loads gemvFP4QVNNI's constants from c: the table and the
// two VPSHUFB controls.
func fp4QVNNIConsts(c reg.Register) (tab, ctlA, ctlB reg.VecVirtual) {
	tab, ctlA, ctlB = ZMM(), ZMM(), ZMM()
	VMOVDQU64(Mem{Base: c}, tab)
	VMOVDQU64(Mem{Base: c, Disp: 64}, ctlA)
	VMOVDQU64(Mem{Base: c, Disp: 128}, ctlB)
	return tab, ctlA, ctlB
}

// fp4QVNNIWeights emits gemvFP4QVNNI's decoding of the chunk at w (32 code
// bytes, the 2 scale bytes at s): the word vectors v0 | v0, v1 | v1,
// v2 | v2, v3 | v3 and the blocks' e8m0 factors in both halves.
func fp4QVNNIWeights(w, s, sc reg.Register, tab, ctlA, ctlB reg.VecVirtual) ([]reg.VecVirtual, reg.VecVirtual) {
	x, xa, xb := ZMM(), ZMM(), ZMM()
	VBROADCASTI64X4(Mem{Base: w}, x)
	VPSHUFB(ctlA, x, xa) // words [0, code byte 2i] in both halves
	VPSHUFB(ctlB, x, xb) // [0, code byte 2i+1]
	wv := []reg.VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	VPERMB(tab, xa, wv[0]) // v0 | v0
	VPERMB(tab, xb, wv[1]) // v1 | v1
	VPSRLW(Imm(4), xa, xa)
	VPSRLW(Imm(4), xb, xb)
	VPERMB(tab, xa, wv[2]) // v2 | v2
	VPERMB(tab, xb, wv[3]) // v3 | v3
	fy := fp4PairFactors(s, sc)
	f := ZMM()
	VSHUFF64X2(Imm(0x44), fy.AsZ(), fy.AsZ(), f) // the 8 lanes in both halves
	return wv, f
}

// storeSumEVEX is storeSum with VEXTRACTF32X4 for VEXTRACTF128 (the same
// result), so that x may be any of the 32 vector registers.
func storeSumEVEX(x reg.VecVirtual, m Mem) {
	xl := XMM()
	VEXTRACTF32X4(Imm(1), x, xl)
	VADDPS(x.AsX(), xl, xl)
	t := XMM()
	VMOVHLPS(xl, xl, t)
	VADDPS(t, xl, xl)
	VMOVSHDUP(xl, t)
	VADDSS(t, xl, xl)
	VMOVSS(xl, m)
}
