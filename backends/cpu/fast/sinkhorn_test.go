package fast

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
)

// TestHCSplitSinkhorn: fast.HCSplitSinkhorn4 is kernels.HCSplitSinkhorn
// bit for bit (NaNs included) over random mixes with large, tiny, zero,
// negative-zero, infinite and NaN values, several iteration counts and eps.
func TestHCSplitSinkhorn(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 80, -80, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-45}
	const hc, mix = 4, 24
	for _, iters := range []int{1, 2, 20} {
		for _, eps := range []float32{1e-6, 0} {
			for trial := range 40 {
				tokens := 1 + r.IntN(20) // (8 and more: the lanes kernel too)
				mixes := make([]float32, tokens*mix)
				for i := range mixes {
					mixes[i] = float32(r.NormFloat64() * 3)
					if trial%4 == 3 && r.IntN(6) == 0 {
						mixes[i] = special[r.IntN(len(special))]
					}
				}
				scale := []float32{float32(r.Float64() * 2), float32(r.Float64() * 2), float32(r.Float64() * 2)}
				base := make([]float32, mix)
				for i := range base {
					base[i] = float32(r.NormFloat64())
				}
				if trial%8 == 7 {
					scale[r.IntN(3)] = special[r.IntN(len(special))]
				}
				pre, post, comb := make([]float32, tokens*hc), make([]float32, tokens*hc), make([]float32, tokens*hc*hc)
				kernels.HCSplitSinkhorn(pre, post, comb, mixes, tokens, hc, scale, base, iters, eps)
				for _, l := range levels(t) {
					got := make([]float32, tokens*mix)
					withLevel(l, func() { HCSplitSinkhorn4(got, mixes, tokens, scale, base, iters, eps) })
					for tk := range tokens {
						o := got[tk*mix : (tk+1)*mix]
						want := append(append(append([]float32(nil), pre[tk*hc:(tk+1)*hc]...), post[tk*hc:(tk+1)*hc]...), comb[tk*hc*hc:(tk+1)*hc*hc]...)
						for i := range mix {
							if math.Float32bits(o[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v iters %d eps %g token %d of %d mix %d: %v (%#x), reference %v (%#x)",
									l, iters, eps, tk, tokens, i, o[i], math.Float32bits(o[i]), want[i], math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		}
	}
}

func BenchmarkHCSplitSinkhorn(b *testing.B) {
	const tokens, hc = 29, 4
	r := rand.New(rand.NewPCG(1, 1))
	mixes := make([]float32, tokens*24)
	for i := range mixes {
		mixes[i] = float32(r.NormFloat64())
	}
	scale, base := []float32{0.5, 0.5, 0.5}, make([]float32, 24)
	out := make([]float32, tokens*24)
	pre, post, comb := make([]float32, tokens*hc), make([]float32, tokens*hc), make([]float32, tokens*hc*hc)
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			kernels.HCSplitSinkhorn(pre, post, comb, mixes, tokens, hc, scale, base, 20, 1e-6)
		}
	})
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			HCSplitSinkhorn4(out, mixes, tokens, scale, base, 20, 1e-6)
		}
	})
}
