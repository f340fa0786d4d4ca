package fast

import (
	"fmt"
	"math"
)

// HCSplitSinkhorn4 is kernels.HCSplitSinkhorn for hc = 4 (the model's),
// bit for bit, written into out [tokens, 24] laid out as the mixes (pre |
// post | comb) rather than three slices; iters >= 1 (the reference's
// contract). The 4×4 matrix lives in 16 scalars (registers, no bounds
// checks): the reference's loops cost ~2 µs a token and layer, every
// prefill token and decode row. Every operation is the reference's, in its
// order (sums from +0 in ascending index, each division by the row's or
// column's sum + eps, no reciprocals). Other hc take the reference.
func HCSplitSinkhorn4(out, mixes []float32, tokens int, scale, base []float32, iters int, eps float32) {
	check("HCSplitSinkhorn4", len(out), tokens*24, len(mixes), tokens*24, len(scale), 3, len(base), 24)
	if iters < 1 {
		panic(fmt.Sprintf("fast.HCSplitSinkhorn4: iters = %d, want >= 1", iters))
	}
	s0, s1, s2 := scale[0], scale[1], scale[2]
	b := (*[24]float32)(base[:24])
	t0 := 0
	if ks := current(); ks.sinkhorn8 != nil && tokens >= 8 {
		// 8 tokens at a time: the same steps up to the first row
		// normalisation, then the iterations in vector lanes
		c := make([]float32, 128) // c[e*8+l]
		for ; t0+8 <= tokens; t0 += 8 {
			for l := range 8 {
				m := (*[24]float32)(mixes[(t0+l)*24 : (t0+l)*24+24])
				o := (*[24]float32)(out[(t0+l)*24 : (t0+l)*24+24])
				for i := range 4 {
					o[i] = sigmoid32(float32(m[i]*s0)+b[i]) + eps
					o[4+i] = 2 * sigmoid32(float32(m[4+i]*s1)+b[4+i])
				}
				for r := range 4 {
					e := 8 + 4*r
					x0, x1, x2, x3 := softmax4(float32(m[e]*s2)+b[e], float32(m[e+1]*s2)+b[e+1], float32(m[e+2]*s2)+b[e+2], float32(m[e+3]*s2)+b[e+3], eps)
					c[(4*r)*8+l], c[(4*r+1)*8+l], c[(4*r+2)*8+l], c[(4*r+3)*8+l] = x0, x1, x2, x3
				}
			}
			ks.sinkhorn8(c, iters, eps)
			for l := range 8 {
				o := out[(t0+l)*24 : (t0+l)*24+24]
				for e := range 16 {
					o[8+e] = c[e*8+l]
				}
			}
		}
	}
	for t := t0; t < tokens; t++ {
		m := (*[24]float32)(mixes[t*24 : t*24+24])
		o := (*[24]float32)(out[t*24 : t*24+24])
		for i := range 4 {
			o[i] = sigmoid32(float32(m[i]*s0)+b[i]) + eps
			o[4+i] = 2 * sigmoid32(float32(m[4+i]*s1)+b[4+i])
		}
		c00, c01, c02, c03 := float32(m[8]*s2)+b[8], float32(m[9]*s2)+b[9], float32(m[10]*s2)+b[10], float32(m[11]*s2)+b[11]
		c10, c11, c12, c13 := float32(m[12]*s2)+b[12], float32(m[13]*s2)+b[13], float32(m[14]*s2)+b[14], float32(m[15]*s2)+b[15]
		c20, c21, c22, c23 := float32(m[16]*s2)+b[16], float32(m[17]*s2)+b[17], float32(m[18]*s2)+b[18], float32(m[19]*s2)+b[19]
		c30, c31, c32, c33 := float32(m[20]*s2)+b[20], float32(m[21]*s2)+b[21], float32(m[22]*s2)+b[22], float32(m[23]*s2)+b[23]
		c00, c01, c02, c03 = softmax4(c00, c01, c02, c03, eps)
		c10, c11, c12, c13 = softmax4(c10, c11, c12, c13, eps)
		c20, c21, c22, c23 = softmax4(c20, c21, c22, c23, eps)
		c30, c31, c32, c33 = softmax4(c30, c31, c32, c33, eps)
		// then columns; iters - 1 times more rows and columns
		for it := range iters {
			if it > 0 {
				c00, c01, c02, c03 = norm4(c00, c01, c02, c03, eps)
				c10, c11, c12, c13 = norm4(c10, c11, c12, c13, eps)
				c20, c21, c22, c23 = norm4(c20, c21, c22, c23, eps)
				c30, c31, c32, c33 = norm4(c30, c31, c32, c33, eps)
			}
			c00, c10, c20, c30 = norm4(c00, c10, c20, c30, eps)
			c01, c11, c21, c31 = norm4(c01, c11, c21, c31, eps)
			c02, c12, c22, c32 = norm4(c02, c12, c22, c32, eps)
			c03, c13, c23, c33 = norm4(c03, c13, c23, c33, eps)
		}
		o[8], o[9], o[10], o[11] = c00, c01, c02, c03
		o[12], o[13], o[14], o[15] = c10, c11, c12, c13
		o[16], o[17], o[18], o[19] = c20, c21, c22, c23
		o[20], o[21], o[22], o[23] = c30, c31, c32, c33
	}
}

// exp32 and sigmoid32 are the reference's elemExp and elemSigmoid.
func exp32(x float32) float32     { return float32(math.Exp(float64(x))) }
func sigmoid32(x float32) float32 { return 1 / (1 + exp32(-x)) }

// softmax4 is kernels' hcSoftmaxRows of one row of 4: exp(c − max) / sum +
// eps, the max and the sum in ascending order (the sum from +0).
func softmax4(a, b, c, d, eps float32) (float32, float32, float32, float32) {
	mx := max(max(max(a, b), c), d)
	a, b, c, d = exp32(a-mx), exp32(b-mx), exp32(c-mx), exp32(d-mx)
	var s float32
	s += a
	s += b
	s += c
	s += d
	return a/s + eps, b/s + eps, c/s + eps, d/s + eps
}

// norm4 divides a row or column of 4 by (its sum from +0 in ascending
// order + eps): kernels' hcNormRows / hcNormCols of one line.
func norm4(a, b, c, d, eps float32) (float32, float32, float32, float32) {
	var s float32
	s += a
	s += b
	s += c
	s += d
	q := s + eps
	return a / q, b / q, c / q, d / q
}
