package numfmt

import (
	"math"

	"github.com/x448/float16"
)

// BF16Bits returns the bfloat16 bit pattern nearest to f (round to nearest,
// ties to even). NaN becomes a quiet NaN with the same sign.
func BF16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16FromBits widens a bfloat16 bit pattern to float32 (exact).
func BF16FromBits(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// BF16Round rounds f to the nearest bfloat16 value (ties to even) and
// returns it as a float32.
func BF16Round(f float32) float32 {
	return BF16FromBits(BF16Bits(f))
}

// BF16RoundSlice rounds every element of x to bfloat16 in place.
func BF16RoundSlice(x []float32) {
	for i, v := range x {
		x[i] = BF16Round(v)
	}
}

// F16ToF32 widens an IEEE binary16 bit pattern to float32 (exact).
func F16ToF32(b uint16) float32 { return float16.Frombits(b).Float32() }

// F32ToF16 rounds f to IEEE binary16 (round to nearest even) and returns its bits.
func F32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// E4M3Max is the largest finite float8_e4m3fn value.
const E4M3Max = 448

var e4m3Table [256]float32

func init() {
	for i := range 256 {
		b := byte(i)
		e := int(b>>3) & 0xf
		m := int(b & 7)
		var v float64
		switch {
		case e == 0xf && m == 7:
			v = math.NaN()
		case e == 0:
			v = math.Ldexp(float64(m), -9)
		default:
			v = math.Ldexp(float64(8+m), e-7-3)
		}
		if b&0x80 != 0 {
			v = -v
		}
		e4m3Table[i] = float32(v)
	}
}

// E4M3ToF32 decodes a float8_e4m3fn byte (exact). 0x7F and 0xFF are NaN.
func E4M3ToF32(b byte) float32 { return e4m3Table[b] }

// F32ToE4M3 encodes f as float8_e4m3fn: round to nearest even, saturating to
// ±448, keeping the sign of zero; NaN becomes 0x7F.
func F32ToE4M3(f float32) byte {
	if f != f {
		return 0x7f
	}
	bits := math.Float32bits(f)
	sign := byte(bits>>24) & 0x80
	a := float64(math.Float32frombits(bits & 0x7fffffff))
	if a >= E4M3Max {
		return sign | 0x7e
	}
	if a < 1.0/64 { // subnormal range: quantum 2^-9; n == 8 is 2^-6 = code 0x08
		return sign | byte(math.RoundToEven(a*512))
	}
	_, e := math.Frexp(a) // a = frac * 2^e, frac in [0.5,1)
	e--                   // a in [2^e, 2^(e+1))
	n := int(math.RoundToEven(math.Ldexp(a, 3-e)))
	// n in [8,16]; n == 16 carries into the exponent naturally.
	return sign | byte((e+7)<<3+n-8)
}

// E8M0ToF32 decodes an e8m0 scale byte: 2^(b-127); 0xFF is NaN.
func E8M0ToF32(b byte) float32 {
	if b == 0xff {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(1, int(b)-127))
}

// F32ToE8M0 returns the e8m0 byte of f, which should be a positive power of
// two: floor(log2|f|)+127, clamped to [0, 254]. NaN gives 0xFF, zero gives 0.
func F32ToE8M0(f float32) byte {
	if f != f {
		return 0xff
	}
	if f == 0 {
		return 0
	}
	_, e := math.Frexp(math.Abs(float64(f)))
	v := e - 1 + 127
	if v < 0 {
		return 0
	}
	if v > 254 {
		return 254
	}
	return byte(v)
}

var e2m1Mag = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// E2M1ToF32 decodes a 4-bit e2m1 code (only the low nibble is used; bit 3
// is the sign, code 8 is -0).
func E2M1ToF32(code byte) float32 {
	v := e2m1Mag[code&7]
	if code&8 != 0 {
		return -v
	}
	return v
}

// F32ToE2M1 encodes f (assumed already clamped to [-6, 6]) as a 4-bit e2m1
// code, rounding to nearest with ties to the even code; the sign is kept,
// including for -0 and values that round to zero. Magnitudes above 6 give 6.
func F32ToE2M1(f float32) byte {
	bits := math.Float32bits(f)
	sign := byte(bits>>28) & 8
	a := math.Float32frombits(bits & 0x7fffffff)
	var c byte
	switch {
	case a <= 0.25:
		c = 0
	case a < 0.75:
		c = 1
	case a <= 1.25:
		c = 2
	case a < 1.75:
		c = 3
	case a <= 2.5:
		c = 4
	case a < 3.5:
		c = 5
	case a <= 5:
		c = 6
	default:
		c = 7
	}
	return sign | c
}
