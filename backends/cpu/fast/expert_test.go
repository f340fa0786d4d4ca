package fast

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
)

func TestExpertMatmul(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const K, O, E = 96, 70, 8
	ex := make([]Expert, E)
	deq := make([][]float32, E)
	for e := range ex {
		if e%2 == 0 {
			w, s := randFP8(r, O, K)
			ex[e] = Expert{Codes: w, Scales: s}
			deq[e] = dequantFP8(w, s, O, K)
		} else {
			w, s := randFP4(r, O, K)
			ex[e] = Expert{FP4: true, Codes: w, Scales: s}
			deq[e] = dequantFP4(w, s, O, K)
		}
	}
	get := func(e int) (Expert, bool) {
		if e < 0 || e >= E {
			return Expert{}, false
		}
		return ex[e], true
	}
	for _, N := range []int{1, 5, 300} {
		for _, perSlot := range []bool{false, true} {
			const k = 3
			rows := N
			if perSlot {
				rows = N * k
			}
			x := randActs(r, rows, K)
			idx := make([]int64, N*k)
			for i := range idx {
				idx[i] = int64(r.IntN(E - 2)) // experts 6, 7 never chosen
			}
			want := make([]float32, N*k*O)
			var mag []float64
			for s := range N * k {
				src := s / k
				if perSlot {
					src = s
				}
				xs, dst := x[src*K:(src+1)*K], want[s*O:(s+1)*O]
				if w := ex[idx[s]]; w.FP4 {
					kernels.MatmulFP4(dst, xs, 1, K, w.Codes, w.Scales, O)
				} else {
					kernels.MatmulFP8(dst, xs, 1, K, w.Codes, w.Scales, O)
				}
				mg := magnitudes(xs, deq[idx[s]], 1, K, O)
				if ex[idx[s]].FP4 {
					mg = fp4Tolerance(mg, xs, deq[idx[s]], 1, K, O)
				}
				mag = append(mag, mg...)
			}
			ex[6].Codes, ex[7].Codes = nil, nil // untouched experts
			for _, l := range levels(t) {
				got := make([]float32, N*k*O)
				var err error
				withLevel(l, func() { err = ExpertMatmul(got, x, N, k, K, O, perSlot, idx, get) })
				if err != nil {
					t.Fatal(err)
				}
				compareBF16(t, fmt.Sprintf("expert %v N=%d perSlot=%v", l, N, perSlot), got, want, mag)
			}
		}
	}
	idx := []int64{0, 9}
	if err := ExpertMatmul(make([]float32, 2*O), make([]float32, K), 1, 2, K, O, false, idx, get); err == nil {
		t.Fatal("out-of-range expert accepted")
	}
}
