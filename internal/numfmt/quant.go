package numfmt

import "math"

// CeilPow2 returns 2^ceil(log2(v)) for a positive finite float32 v, computed
// as the reference does on the float32 bits: exponent field - 127 + (mantissa != 0).
func CeilPow2(v float32) float32 {
	b := math.Float32bits(v)
	e := int((b>>23)&0xff) - 127
	if b&0x7fffff != 0 {
		e++
	}
	return float32(math.Ldexp(1, e))
}

func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if v < 0 {
			v = -v
		}
		if v > m {
			m = v
		}
	}
	return m
}

func clamp(v, lo, hi float32) float32 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

func checkBlock(n, block int) {
	if block <= 0 || n%block != 0 {
		panic("numfmt: length is not a multiple of the block size")
	}
}

// ActQuant is act_quant(x, block, "ue8m0") (spec §6.3). For every block of
// `block` consecutive elements of x (which must hold bf16 values):
// a = max(max|x|, 1e-4), s = 2^ceil(log2(a·fp32(1/448))) (on the fp32 bits),
// q = e4m3_RNE(clamp(x/s, -448, 448)). If codes is non-nil it receives the
// e4m3 codes (len(x)); if scales is non-nil it receives s (len(x)/block).
// x is overwritten in place with bf16(q·s).
func ActQuant(x []float32, block int, codes []byte, scales []float32) {
	checkBlock(len(x), block)
	for bi := 0; bi*block < len(x); bi++ {
		xb := x[bi*block : (bi+1)*block]
		s := ActQuantScale(absMax(xb))
		if scales != nil {
			scales[bi] = s
		}
		if codes == nil && actQuantBlockFast(xb, s) {
			continue
		}
		for i, v := range xb {
			c := F32ToE4M3(clamp(v/s, -E4M3Max, E4M3Max))
			if codes != nil {
				codes[bi*block+i] = c
			}
			xb[i] = BF16Round(E4M3ToF32(c) * s)
		}
	}
}

// ActQuantScale is ActQuant's scale of a block whose largest magnitude is
// amax: 2^ceil(log2(max(amax, 1e-4)·fp32(1/448))).
func ActQuantScale(amax float32) float32 {
	const inv = float32(1.0 / 448)
	return CeilPow2(max(amax, float32(1e-4)) * inv)
}

// ActQuantFastScale reports whether ActQuant's fast path (and the vector
// kernels that copy it) takes scale s: a power of two in [2^-22, 2^120].
func ActQuantFastScale(s float32) bool {
	sb := math.Float32bits(s)
	return sb&0x7fffff == 0 && sb>>23 >= 127-22 && sb>>23 <= 127+120
}

// ActQuantInplace is ActQuant without the code and scale outputs:
// x <- bf16(q·s).
func ActQuantInplace(x []float32, block int) { ActQuant(x, block, nil, nil) }

// fp4Block quantises one block with scale s: v = clamp(x/s, -6, 6),
// q = e2m1_RNE(v), x <- bf16(q·s); codes are packed two per byte, the even
// element in the low nibble.
func fp4Block(xb []float32, s float32, packed []byte) {
	for i, v := range xb {
		c := F32ToE2M1(clamp(v/s, -6, 6))
		if packed != nil {
			if i&1 == 0 {
				packed[i/2] = c
			} else {
				packed[i/2] |= c << 4
			}
		}
		xb[i] = BF16Round(E2M1ToF32(c) * s)
	}
}

// FP4ActQuantE8M0 is fp4_act_quant(x, block, inplace, e8m0) (spec §6.4,
// block 32 in the model): a = max(max|x|, 6·2^-126),
// s = 2^ceil(log2(a·fp32(1/6))), q = e2m1_RNE(clamp(x/s, -6, 6)),
// x <- bf16(q·s). packed (len(x)/2 bytes, low nibble = even element) and
// scales (len(x)/block) may be nil.
func FP4ActQuantE8M0(x []float32, block int, packed []byte, scales []float32) {
	checkBlock(len(x), block)
	if block%2 != 0 {
		panic("numfmt: fp4 block size must be even")
	}
	const inv = float32(1.0 / 6)
	floor := float32(math.Ldexp(6, -126))
	for bi := 0; bi*block < len(x); bi++ {
		xb := x[bi*block : (bi+1)*block]
		a := max(absMax(xb), floor)
		s := CeilPow2(a * inv)
		if scales != nil {
			scales[bi] = s
		}
		var pb []byte
		if packed != nil {
			pb = packed[bi*block/2 : (bi+1)*block/2]
		}
		fp4Block(xb, s, pb)
	}
}

// FP4ActQuantE4M3 is fp4_act_quant(x, block, inplace, e4m3) (spec §6.4,
// block 16 in the model): a = max(max|x|, 6·2^-9),
// s = e4m3_RNE_satfinite(a/6), then as FP4ActQuantE8M0.
func FP4ActQuantE4M3(x []float32, block int, packed []byte, scales []float32) {
	checkBlock(len(x), block)
	if block%2 != 0 {
		panic("numfmt: fp4 block size must be even")
	}
	floor := float32(math.Ldexp(6, -9))
	for bi := 0; bi*block < len(x); bi++ {
		xb := x[bi*block : (bi+1)*block]
		a := max(absMax(xb), floor)
		s := E4M3ToF32(F32ToE4M3(a / 6))
		if scales != nil {
			scales[bi] = s
		}
		var pb []byte
		if packed != nil {
			pb = packed[bi*block/2 : (bi+1)*block/2]
		}
		fp4Block(xb, s, pb)
	}
}

// actQuantBlockFast is the in-place body of ActQuant for one block with a
// finite scale s (a power of two in [2^-22, 2^120]) and finite elements; it
// reports false, leaving xb untouched, otherwise. It gives the reference's
// bits: x/s = x·(1/s) exactly (powers of two in the normal range), the e4m3
// round to nearest even is done on the float32 bits (3 mantissa bits from
// 2^-6 on, the 2^-9 quantum below by adding 2^14), and q·s, a value of at
// most 4 significant bits in the normal range, is already a bf16 value.
func actQuantBlockFast(xb []float32, s float32) bool {
	if !ActQuantFastScale(s) {
		return false
	}
	for _, v := range xb {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 { // Inf or NaN
			return false
		}
	}
	r := 1 / s
	for i, v := range xb {
		u := math.Float32bits(v * r)
		sign := u & 0x80000000
		a := math.Float32frombits(u &^ 0x80000000)
		var q float32
		switch {
		case a >= E4M3Max:
			q = E4M3Max
		case a < 1.0/64:
			q = (a + 16384) - 16384
		default:
			b := math.Float32bits(a)
			b += 0x7ffff + (b>>20)&1
			q = math.Float32frombits(b &^ 0xfffff)
		}
		xb[i] = math.Float32frombits(math.Float32bits(q*s) | sign)
	}
	return true
}
