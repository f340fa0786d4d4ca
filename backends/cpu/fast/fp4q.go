package fast

import (
	"math"
	"unsafe"

	"github.com/ds4go/ds4/internal/numfmt"
)

// The fp4 GEMV on 16-bit activations (gemvFP4Q).
//
// An fp4 Linear multiplies e2m1 weights by activations that act_quant has
// already rounded to e4m3 codes times a power of two per 32-block. Such a
// block is held exactly by 16-bit integers times one power of two (the
// codes of magnitude ≥ 1/8 of the code scale are multiples of 2^-6 of it),
// and 2·e2m1 is a small integer, so a block's dot product can be summed
// exactly in 32-bit integers by VPMADDWD, which does 16 multiply-adds per
// instruction where the float path needs a widening and an FMA per 8. That
// makes the decode GEMV of the routed experts memory-bound instead of
// shuffle-bound. Codes below 1/8 of the scale, and activations that are not
// quantised at all, are rounded to that grid: off by at most 2^-15 of their
// block's largest magnitude per element. In a sum that cancels, that can
// exceed a bf16 ulp of the result (the tests bound it; the golden
// block-local parity is unchanged).

// fp4QChunk is the packed size of 64 activations: 4 vectors of 16 int16
// and 8 float32 factors.
const fp4QChunk = 160

// fp4QRowBytes is the packed size of an activation row of nb blocks (nb even).
func fp4QRowBytes(nb int) int { return nb / 2 * fp4QChunk }

// fp4QWord[el] is the word (within lane 0 of a packed chunk) that holds
// element el of a 32-block: vector v word i holds element fp4QElem(v, i),
// the order in which gemvFP4QAVX2 decodes the weights (v0 = 4i, v1 = 4i+2,
// v2 = 4i+1, v3 = 4i+3).
var fp4QWord = func() (w [32]int) {
	for i := range 8 {
		w[4*i], w[4*i+2], w[4*i+1], w[4*i+3] = i, 16+i, 32+i, 48+i
	}
	return w
}()

// packFP4Q packs the activation row a (len a multiple of 64) into dst
// (fp4QRowBytes(len(a)/32) bytes) for gemvFP4Q: per block the integers
// round(x·2^k), k = 15 − e for the largest magnitude 2^(e-1) ≤ amax < 2^e,
// and the factor 2^(e−24) that undoes k and the kernel's 2·256 weight
// scaling. It reports false, dst partly written, when a block has an Inf or
// NaN or a nonzero largest magnitude below 2^-103 (the factor would not be
// a normal float); the caller then takes the float path.
func packFP4Q(dst []byte, a []float32) bool {
	_ = dst[fp4QRowBytes(len(a)/32)-1]
	for c := 0; c+64 <= len(a); c += 64 {
		ch := dst[c/64*fp4QChunk : c/64*fp4QChunk+fp4QChunk : c/64*fp4QChunk+fp4QChunk]
		words := (*[72]int16)(unsafe.Pointer(&ch[0])) // 64 words; 72 for ws below
		facs := (*[8]float32)(unsafe.Pointer(&ch[128]))
		for l := range 2 {
			blk := (*[32]float32)(a[c+32*l : c+32*l+32])
			var amax uint32
			for _, x := range blk {
				amax = max(amax, math.Float32bits(x)&0x7FFFFFFF)
			}
			if amax >= 0x7F800000 {
				return false
			}
			var mul, fac float32
			if amax != 0 {
				e := int(amax>>23) - 126 // 2^(e-1) ≤ amax < 2^e
				if e < -102 {
					return false
				}
				mul = math.Float32frombits(uint32(127+15-e) << 23)
				fac = math.Float32frombits(uint32(127+e-24) << 23)
			}
			ws := (*[64]int16)(words[l*8:])
			for el, x := range blk {
				// round to nearest even: |x·mul| < 2^15, so x·mul + 1.5·2^23
				// has the rounded integer in its low mantissa bits (2^15 at
				// most, which saturates)
				q := int32(math.Float32bits(x*mul+12582912)) - 0x4B400000
				ws[fp4QWord[el]&63] = int16(min(q, 32767))
			}
			for q := range 4 {
				facs[l*4+q] = fac
			}
		}
	}
	return true
}

// packFP4QRows packs the m rows of a (k each) for gemvFP4Q into a pooled
// buffer, fp4QRowBytes((k/32)&^1) bytes a row, in packFP4Q's layout or, when
// pairs and ks.fp4QPairs, as gemvFP4Q reads them (pairFP4QRows); it returns
// nil when a row does not pack (the caller then takes the float path), else
// the rows and the buffer to put back.
func packFP4QRows(ks *kernelSet, a []float32, m, k int, pairs bool) ([]byte, *[]float32) {
	nbq := (k / block) &^ 1
	lda := fp4QRowBytes(nbq)
	qb := getBuf(m * lda / 4)
	q := asBytes(*qb)
	for i := range m {
		if !ks.packFP4Q(q[i*lda:(i+1)*lda], a[i*k:i*k+nbq*block]) {
			putBuf(qb)
			return nil, nil
		}
	}
	if pairs && ks.fp4QPairs && m > 1 {
		pb := getBuf(m * lda / 4)
		p := asBytes(*pb)
		pairFP4QRows(ks, p, lda, m, func(i int) []byte { return q[i*lda : (i+1)*lda] })
		putBuf(qb)
		return p, pb
	}
	return q, qb
}

// fp4QConsts are the constants of gemvFP4QAVX2: the int8 table of 2·e2m1
// per 128-bit lane, 0x0F bytes and 0xFF00 words.
var fp4QConsts [96]byte

func init() {
	for i := range 16 {
		v := int8(2 * numfmt.E2M1ToF32(byte(i))) // (lutE2M1 is set by a later init)
		for l := range 2 {
			fp4QConsts[16*l+i] = byte(v)
		}
	}
	for i := range 32 {
		fp4QConsts[32+i] = 0x0F
		if i%2 == 1 {
			fp4QConsts[64+i] = 0xFF
		}
	}
}

// fp4QConsts512 are the constants of gemvFP4QAVX512: the VPERMB table
// tab[b] = 2·e2m1(b & 15) for b < 64, and the VPSHUFB control that places
// byte 2i (low 256 bits) or 2i+1 (high 256 bits) of each 128-bit lane as
// the high byte of word i, the low byte zero (0x80).
var fp4QConsts512 [128]byte

func init() {
	for i := range 64 {
		fp4QConsts512[i] = fp4QConsts[i&15]
	}
	for i := range 32 {
		odd := byte(i / 16) // the high 256 bits take the odd bytes
		l, wd := i/8, i%8   // 128-bit lane, word within it
		fp4QConsts512[64+16*l+2*wd] = 0x80
		fp4QConsts512[64+16*l+2*wd+1] = byte(2*wd) + odd
	}
}

// fp4QConstsVNNI are the constants of gemvFP4QVNNI: the VPERMB table of
// fp4QConsts512 and two VPSHUFB controls that place code byte 2i (the
// first) or 2i+1 (the second) of each 128-bit lane as the high byte of word
// i in every lane, the low byte zero.
var fp4QConstsVNNI [192]byte

func init() {
	copy(fp4QConstsVNNI[:64], fp4QConsts512[:64])
	for c := range 2 {
		for i := range 32 {
			l, wd := i/8, i%8 // 128-bit lane, word within it
			fp4QConstsVNNI[64+64*c+16*l+2*wd] = 0x80
			fp4QConstsVNNI[64+64*c+16*l+2*wd+1] = byte(2*wd + c)
		}
	}
}

// pairFP4Q interleaves the packed rows r0 and r1 (packFP4Q's layout, len(dst)
// = 2·len(r0) bytes) into dst for gemvFP4QVNNI: per 64-element chunk the
// five 32-byte parts of r0's 160 bytes (four word vectors and the factors),
// each followed by r1's.
func pairFP4Q(dst, r0, r1 []byte) {
	_, _ = r1[len(r0)-1], dst[2*len(r0)-1]
	for c := 0; c+fp4QChunk <= len(r0); c += fp4QChunk {
		d := (*[2 * fp4QChunk / 8]uint64)(unsafe.Pointer(&dst[2*c]))
		a := (*[fp4QChunk / 8]uint64)(unsafe.Pointer(&r0[c]))
		b := (*[fp4QChunk / 8]uint64)(unsafe.Pointer(&r1[c]))
		for v := range 5 {
			d[8*v], d[8*v+1], d[8*v+2], d[8*v+3] = a[4*v], a[4*v+1], a[4*v+2], a[4*v+3]
			d[8*v+4], d[8*v+5], d[8*v+6], d[8*v+7] = b[4*v], b[4*v+1], b[4*v+2], b[4*v+3]
		}
	}
}

// pairFP4QRows lays out the m packed rows of src (lda bytes each) in dst as
// ks.gemvFP4Q reads them: interleaved in pairs (an odd last row as it is)
// when ks.fp4QPairs, else as they are. row(i) returns row i of src (its
// lda bytes).
func pairFP4QRows(ks *kernelSet, dst []byte, lda, m int, row func(i int) []byte) {
	i := 0
	if ks.fp4QPairs {
		for ; i+1 < m; i += 2 {
			pairFP4Q(dst[i*lda:(i+2)*lda], row(i), row(i+1))
		}
	}
	for ; i < m; i++ {
		copy(dst[i*lda:(i+1)*lda], row(i))
	}
}

// fp4QShuf is the VPSHUFB control of packFP4QAVX2: in each 128-bit lane the
// words [a0 a1 a2 a3 b0 b1 b2 b3] become [a0 b0 a2 b2 a1 b1 a3 b3].
var fp4QShuf = func() (c [32]byte) {
	for l := range 2 {
		for w, src := range [8]int{0, 4, 2, 6, 1, 5, 3, 7} {
			c[16*l+2*w], c[16*l+2*w+1] = byte(2*src), byte(2*src+1)
		}
	}
	return c
}()

// asBytes views a float32 buffer as bytes (the packed activations live in
// pooled float32 buffers).
func asBytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}
