package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
)

// TestRMSNorm checks MeanSquare and RMSNorm against the reference kernels
// bit for bit, on row lengths around every boundary of torch's cascade sum
// (scalar path, partial vectors, partial 4-vector rows, several cascade
// levels) and with zeros, Infs and NaNs.
func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	for _, dim := range []int{5, 8, 31, 32, 33, 100, 512, 513, 2048, 4099, 8192, 20480, 70000} {
		for _, rows := range []int{1, 3} {
			x := randF32(r, rows*dim, true)
			w := randF32(r, dim, true)
			for i := range x {
				x[i] *= float32(math.Ldexp(1, r.IntN(20)-10))
			}
			if dim > 40 {
				x[7] = 0
				if rows > 1 {
					x[dim+3] = float32(math.Inf(1))
				}
				if rows > 1 {
					x[2*dim+1] = float32(math.NaN())
				}
			}
			for _, l := range levels(t) {
				name := fmt.Sprintf("%v dim %d rows %d", l, dim, rows)
				wantMS, gotMS := make([]float32, rows), make([]float32, rows)
				kernels.MeanSquare(wantMS, x, rows, dim)
				withLevel(l, func() { MeanSquare(gotMS, x, rows, dim) })
				for i := range wantMS {
					if math.Float32bits(wantMS[i]) != math.Float32bits(gotMS[i]) && !(wantMS[i] != wantMS[i] && gotMS[i] != gotMS[i]) {
						t.Fatalf("%s: mean square [%d] = %g, want %g", name, i, gotMS[i], wantMS[i])
					}
				}
				want, got := make([]float32, rows*dim), make([]float32, rows*dim)
				kernels.RMSNorm(want, x, rows, dim, w, 1e-6)
				withLevel(l, func() { RMSNorm(got, x, rows, dim, w, 1e-6) })
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
						t.Fatalf("%s: [%d] = %g, want %g", name, i, got[i], want[i])
					}
				}
			}
		}
	}
}
