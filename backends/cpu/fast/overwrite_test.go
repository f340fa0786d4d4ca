package fast

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
)

// TestMatmulsOverwrite checks that every matmul writes each element of its
// output whatever the buffer held (the CPU backend hands them unzeroed
// arena slots): NaN-filled and zeroed outputs give the same bits, at every
// level, for decode and prefill row counts and the per-row forms.
func TestMatmulsOverwrite(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 1))
	k, n := 96, 80
	w32 := randF32(r, n*k, true)
	w16 := make([]byte, 2*n*k)
	for i, v := range w32 {
		b := numfmt.BF16Bits(v)
		w16[2*i], w16[2*i+1] = byte(b), byte(b>>8)
	}
	w8, s8 := randFP8(r, n, k)
	w4, s4 := randFP4(r, n, k)
	type mm struct {
		name string
		f    func(out, a []float32, m int)
	}
	mms := []mm{
		{"F32", func(o, a []float32, m int) { MatmulF32(o, a, w32, m, k, n) }},
		{"BF16", func(o, a []float32, m int) { MatmulBF16(o, a, w32, m, k, n) }},
		{"F32W16", func(o, a []float32, m int) { MatmulF32W16(o, a, w16, m, k, n) }},
		{"BF16W16", func(o, a []float32, m int) { MatmulBF16W16(o, a, w16, m, k, n) }},
		{"FP8", func(o, a []float32, m int) { MatmulFP8(o, a, m, k, w8, s8, n) }},
		{"FP4", func(o, a []float32, m int) { MatmulFP4(o, a, m, k, w4, s4, n) }},
		{"F32PerRow", func(o, a []float32, m int) { MatmulF32PerRow(o, a, w32, m, k, n) }},
		{"BF16PerRow", func(o, a []float32, m int) { MatmulBF16PerRow(o, a, w32, m, k, n) }},
		{"F32W16PerRow", func(o, a []float32, m int) { MatmulF32W16PerRow(o, a, w16, m, k, n) }},
		{"BF16W16PerRow", func(o, a []float32, m int) { MatmulBF16W16PerRow(o, a, w16, m, k, n) }},
		{"FP8PerRow", func(o, a []float32, m int) { MatmulFP8PerRow(o, a, m, k, w8, s8, n) }},
		{"FP4PerRow", func(o, a []float32, m int) { MatmulFP4PerRow(o, a, m, k, w4, s4, n) }},
	}
	nan := float32(math.NaN())
	for _, l := range levels(t) {
		for _, m := range []int{1, 3, 7, 40, 130} {
			a := randActs(r, m, k)
			for _, c := range mms {
				want, got := make([]float32, m*n), make([]float32, m*n)
				for i := range got {
					got[i] = nan
				}
				withLevel(l, func() {
					c.f(want, a, m)
					c.f(got, a, m)
				})
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%v %s m=%d: [%d] = %g on a NaN-filled output, %g on a zeroed one", l, c.name, m, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestExpertMatmulOverwrite is TestMatmulsOverwrite for ExpertMatmul (the
// CPU op's output is an unzeroed arena slot): fp4 and fp8 experts, K with
// and without a half chunk past the last 64-element chunk, decode and
// prefill token counts, shared and per-slot activations.
func TestExpertMatmulOverwrite(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 9))
	const E, k, O = 4, 3, 40
	nan := float32(math.NaN())
	for _, K := range []int{96, 128} {
		ws := make([]Expert, E)
		for e := range ws {
			if e%2 == 0 {
				q, s := randFP4(r, O, K)
				ws[e] = Expert{FP4: true, Codes: q, Scales: s}
			} else {
				q, s := randFP8(r, O, K)
				ws[e] = Expert{Codes: q, Scales: s}
			}
		}
		get := func(e int) (Expert, bool) { return ws[e], e < E }
		for _, l := range levels(t) {
			for _, N := range []int{1, 5, 40} {
				for _, perSlot := range []bool{false, true} {
					rowsX := N
					if perSlot {
						rowsX = N * k
					}
					x := randActs(r, rowsX, K)
					idx := make([]int64, N*k)
					for i := range idx {
						idx[i] = int64(r.IntN(E))
					}
					want, got := make([]float32, N*k*O), make([]float32, N*k*O)
					for i := range got {
						got[i] = nan
					}
					withLevel(l, func() {
						if err := ExpertMatmul(want, x, N, k, K, O, perSlot, idx, get); err != nil {
							t.Fatal(err)
						}
						if err := ExpertMatmul(got, x, N, k, K, O, perSlot, idx, get); err != nil {
							t.Fatal(err)
						}
					})
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%v K=%d N=%d perSlot=%v: [%d] = %g on a NaN-filled output, %g on a zeroed one", l, K, N, perSlot, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
