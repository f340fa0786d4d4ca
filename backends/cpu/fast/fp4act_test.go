package fast

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
)

// TestFP4ActQuantIsTheReference: FP4ActQuant gives numfmt's bits for both
// scale kinds on blocks of every magnitude (tiny e8m0 scales whose products
// are subnormal, huge ones), zeros of both signs, ties of the e2m1
// thresholds, and blocks with an Inf or a NaN (the reference's path).
func TestFP4ActQuantIsTheReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 3000 {
		for _, e4m3 := range []bool{false, true} {
			block := 32
			if e4m3 {
				block = 16
			}
			x := make([]float32, 4*block)
			exp := rng.IntN(250) - 125
			for i := range x {
				switch rng.IntN(12) {
				case 0:
					x[i] = 0
				case 1:
					x[i] = float32(math.Copysign(0, -1))
				case 2: // a threshold of the e2m1 rounding, times a power of two
					th := []float32{0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6}
					x[i] = th[rng.IntN(len(th))] * float32(math.Ldexp(1, exp)) * float32(1-2*rng.IntN(2))
				default:
					x[i] = float32(rng.NormFloat64() * math.Ldexp(1, exp))
				}
			}
			if trial%50 == 0 {
				x[rng.IntN(len(x))] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[trial%3]
			}
			want, got := slices.Clone(x), slices.Clone(x)
			if e4m3 {
				numfmt.FP4ActQuantE4M3(want, block, nil, nil)
			} else {
				numfmt.FP4ActQuantE8M0(want, block, nil, nil)
			}
			FP4ActQuant(got, block, e4m3)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("trial %d e4m3 %v: element %d of %v: %v (%08x), want %v (%08x)", trial, e4m3, i, x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}

func BenchmarkFP4ActQuant(b *testing.B) {
	x := make([]float32, 8192)
	y := make([]float32, 8192)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64()) // activations: the codes are not predictable
	}
	b.Run("ref", func(b *testing.B) {
		for b.Loop() {
			copy(y, x)
			numfmt.FP4ActQuantE8M0(y, 32, nil, nil)
		}
	})
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			copy(y, x)
			FP4ActQuant(y, 32, false)
		}
	})
}
