package fast

import (
	"math"

	"github.com/ds4go/ds4/internal/numfmt"
)

// FP4ActQuant is numfmt.FP4ActQuantE8M0 (e4m3 false) or
// numfmt.FP4ActQuantE4M3 (e4m3 true) in place without the packed codes and
// scales, bit for bit. A block of finite elements is quantised without
// branches on the values: with an e8m0 scale s (a power of two, 2^-126 ≤
// s ≤ 2^126 for finite blocks) x/s is x·(1/s) exactly; the e2m1 code is
// the count of round-to-nearest-even thresholds the magnitude passes, and
// the decoded code times s is the reference's product. A block holding an
// Inf or a NaN takes the reference.
func FP4ActQuant(x []float32, block int, e4m3 bool) {
	if block <= 0 || block%2 != 0 || len(x)%block != 0 {
		fp4ActRef(x, block, e4m3) // (its panics)
		return
	}
	for b0 := 0; b0 < len(x); b0 += block {
		xb := x[b0 : b0+block]
		if !finite(xb) {
			fp4ActRef(xb, block, e4m3)
			continue
		}
		fp4ActBlock(xb, e4m3)
	}
}

func fp4ActRef(x []float32, block int, e4m3 bool) {
	if e4m3 {
		numfmt.FP4ActQuantE4M3(x, block, nil, nil)
	} else {
		numfmt.FP4ActQuantE8M0(x, block, nil, nil)
	}
}

// finite reports whether no element of x is an Inf or a NaN.
func finite(x []float32) bool {
	var or uint32
	for _, v := range x {
		b := math.Float32bits(v) & 0x7f800000
		or |= (b + 0x00800000) & 0x80000000 // exponent all ones carries into bit 31
	}
	return or == 0
}

// e2m1Mags are the e2m1 magnitudes by code.
var e2m1Mags = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// e2m1Steps are the bits of the thresholds an e2m1 magnitude passes on
// its way up (round to nearest, ties to the even code): above 0.25, from
// 0.75, above 1.25, from 1.75, above 2.5, from 3.5, above 5; "from t" is
// "above the float before t". Positive floats order as their bits.
var e2m1Steps = [7]int32{
	int32(math.Float32bits(0.25)), int32(math.Float32bits(0.75)) - 1, int32(math.Float32bits(1.25)),
	int32(math.Float32bits(1.75)) - 1, int32(math.Float32bits(2.5)), int32(math.Float32bits(3.5)) - 1, int32(math.Float32bits(5)),
}

// fp4ActBlock quantises one block of finite elements (numfmt's numerics).
func fp4ActBlock(xb []float32, e4m3 bool) {
	var am uint32
	for _, v := range xb {
		am = max(am, math.Float32bits(v)&0x7fffffff)
	}
	a := math.Float32frombits(am)
	var s, r float32
	if e4m3 {
		a = max(a, float32(math.Ldexp(6, -9)))
		s = numfmt.E4M3ToF32(numfmt.F32ToE4M3(a / 6))
	} else {
		a = max(a, float32(math.Ldexp(6, -126)))
		s = numfmt.CeilPow2(a * float32(1.0/6))
		r = 1 / s
	}
	t := &e2m1Steps
	for i, v := range xb {
		q := v * r
		if e4m3 {
			q = v / s
		}
		bits := math.Float32bits(q)
		m := int32(bits & 0x7fffffff)
		c := uint32(t[0]-m)>>31 + uint32(t[1]-m)>>31 + uint32(t[2]-m)>>31 + uint32(t[3]-m)>>31 +
			uint32(t[4]-m)>>31 + uint32(t[5]-m)>>31 + uint32(t[6]-m)>>31
		o := e2m1Mags[c&7] * s
		xb[i] = numfmt.BF16Round(math.Float32frombits(math.Float32bits(o) | bits&0x80000000))
	}
}
