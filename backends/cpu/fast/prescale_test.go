package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFP8TinyProductsExact: fp8 products whose e4m3·2^-120 partials would
// be subnormal f32s (activations near 2^-34 against codes near 2^7) keep the
// precision of normal ones: every output is within the f32 sum's error
// bound of the float64 product, rounded to bf16. Without the 2^64
// pre-scale (fp8PreScaleExp) the partials keep 2 or 3 bits and this
// fails at the vector levels. One row with a 2^70 element (not
// fp8Scalable) takes the old scaling; it and the rows beside it must still
// match, and every row equals its one-row call.
func TestFP8TinyProductsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ m, k, n int }{{1, 256, 64}, {3, 1024, 96}, {8, 512, 64}, {5, 200, 40}, {2, 64, 33}} {
		m, k, n := sh.m, sh.k, sh.n
		a := randActs(r, m, k)
		for i := range a {
			a[i] *= 0x1p-36
		}
		if m > 2 {
			a[k+5] = 0x1p70 // row 1: the old scaling
		}
		w, s := randFP8(r, n, k)
		for i := range s {
			s[i] = 127 // factor 1: the partials' size is the activations'
		}
		wf := dequantFP8(w, s, n, k)
		for _, l := range levels(t) {
			got := make([]float32, m*n)
			withLevel(l, func() { MatmulFP8(got, a, m, k, w, s, n) })
			for i := range m {
				one := make([]float32, n)
				withLevel(l, func() { MatmulFP8(one, a[i*k:(i+1)*k], 1, k, w, s, n) })
				for j := range n {
					var x, mag float64
					for c := range k {
						p := float64(a[i*k+c]) * float64(wf[j*k+c])
						x, mag = x+p, mag+math.Abs(p)
					}
					g := got[i*n+j]
					what := fmt.Sprintf("%v m=%d k=%d n=%d [%d,%d]", l, m, k, n, i, j)
					if math.Float32bits(g) != math.Float32bits(one[j]) {
						t.Fatalf("%s: %v in the call of %d rows, %v alone", what, g, m, one[j])
					}
					// bf16 rounding (half an ulp of the result, 2^-9 of it)
					// plus the f32 sum's bound (k·2^-24 of the magnitudes)
					if d := math.Abs(float64(g) - x); d > math.Abs(x)*0x1p-8+mag*float64(k)*0x1p-24 {
						t.Fatalf("%s: %g, want %g (|Δ| %.3g, magnitudes %.3g)", what, g, x, d, mag)
					}
				}
			}
		}
	}
}

// TestFP8Scalable: a row is scalable unless it holds a finite magnitude
// of 2^64 or more, whatever Inf or NaN it holds besides, at every length
// and kernel set.
func TestFP8Scalable(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, ks := range []*kernelSet{portable, current()} {
		for _, n := range []int{1, 7, 8, 9, 64, 100} {
			for _, c := range []struct {
				put  []float32
				want bool
			}{
				{nil, true}, {[]float32{0x1p63 * 1.99}, true}, {[]float32{-0x1p64}, false}, {[]float32{0x1p100}, false},
				{[]float32{inf}, true}, {[]float32{-inf, nan}, true}, {[]float32{inf, 0x1p70}, false}, {[]float32{nan, -0x1p127}, false},
			} {
				if len(c.put) > n {
					continue
				}
				a := make([]float32, n)
				for i := range a {
					a[i] = float32(i%5) - 2
				}
				for i, v := range c.put {
					a[(n-1)-i*(n/2)] = v // the end of the row (a tail past the vector kernel's) and its middle
				}
				if got := fp8Scalable(ks, a); got != c.want {
					t.Errorf("n=%d %v: fp8Scalable = %v, want %v", n, c.put, got, c.want)
				}
			}
		}
	}
}
