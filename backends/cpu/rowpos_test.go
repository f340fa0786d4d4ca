package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// TestRowStartPositions: the ops a ragged call runs once for all rows
// (rowPositionOps) with start_pos i64[B] give row b what a call of that
// row alone at start_pos[b] gives, bit for bit (window_update and
// engram_hist_update write row b of their state in place; a row at 0
// takes the prefill write).
func TestRowStartPositions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const B, W, D, M = 4, 8, 16, 40
	ps := []int64{3, 0, 17, 9}
	all := &backends.Tensor{DType: ir.I64, Shape: []int{B}, I64: ps}
	one := func(b int) *backends.Tensor {
		return &backends.Tensor{DType: ir.I64, Shape: []int{}, I64: []int64{ps[b]}}
	}
	tokens := &backends.Tensor{DType: ir.I64, Shape: []int{B, 1}, I64: []int64{5, 6, 7, 8}}
	tok := func(b int) *backends.Tensor {
		return &backends.Tensor{DType: ir.I64, Shape: []int{1, 1}, I64: tokens.I64[b : b+1]}
	}
	sameInts := func(what string, got, want []int64) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}

	pos := runOp(t, "positions", ir.Attrs{"ratio": int64(1)}, tokens, all)
	if !slices.Equal(pos.Shape, []int{B, 1}) {
		t.Fatalf("positions of i64[B] start positions: shape %v, want [%d 1]", pos.Shape, B)
	}
	for b := range B {
		sameInts("positions row", pos.I64[b:b+1], runOp(t, "positions", ir.Attrs{"ratio": int64(1)}, tok(b), one(b)).I64)
	}

	for _, phase := range []string{"decode", "prefill"} {
		attrs := ir.Attrs{"window": int64(W), "phase": phase}
		got := runOp(t, "window_idx", attrs, tokens, all)
		n := len(got.I32) / B
		for b := range B {
			want := runOp(t, "window_idx", attrs, tok(b), one(b)).I32
			if !slices.Equal(got.I32[b*n:(b+1)*n], want) {
				t.Fatalf("window_idx %s row %d: %v, want %v", phase, b, got.I32[b*n:(b+1)*n], want)
			}
		}
	}

	ring := randTensor(r, ir.F32, B, W, D)
	kv := randTensor(r, ir.F32, B, 1, D)
	want := make([][]float32, B)
	for b := range B {
		rb := &backends.Tensor{DType: ir.F32, Shape: []int{1, W, D}, F32: slices.Clone(ring.F32[b*W*D : (b+1)*W*D])}
		kb := &backends.Tensor{DType: ir.F32, Shape: []int{1, 1, D}, F32: kv.F32[b*D : (b+1)*D]}
		want[b] = runOp(t, "window_update", nil, rb, kb, one(b)).F32
	}
	got := runOp(t, "window_update", nil, ring, kv, all)
	for b := range B {
		sameBits(t, "window_update row", got.F32[b*W*D:(b+1)*W*D], want[b])
	}

	hist := &backends.Tensor{DType: ir.I64, Shape: []int{B, M}, I64: make([]int64, B*M)}
	for i := range hist.I64 {
		hist.I64[i] = int64(r.IntN(50)) - 1
	}
	wantH := make([][]int64, B)
	for b := range B {
		hb := &backends.Tensor{DType: ir.I64, Shape: []int{1, M}, I64: slices.Clone(hist.I64[b*M : (b+1)*M])}
		wantH[b] = runOp(t, "engram_hist_update", nil, hb, tok(b), one(b)).I64
	}
	gotH := runOp(t, "engram_hist_update", nil, hist, tokens, all)
	for b := range B {
		sameInts("engram_hist_update row", gotH.I64[b*M:(b+1)*M], wantH[b])
	}

	hattrs := ir.Attrs{"multipliers": []int64{3, 5, 7}, "primes": []int64{11, 13, 17, 19}, "offsets": []int64{0, 11, 24, 41}, "heads": int64(2)}
	pad := &backends.Tensor{DType: ir.I64, Shape: []int{}, I64: []int64{2}}
	gotE := runOp(t, "engram_hash", hattrs, gotH, tokens, all, pad)
	n := len(gotE.I64) / B
	for b := range B {
		hb := &backends.Tensor{DType: ir.I64, Shape: []int{1, M}, I64: gotH.I64[b*M : (b+1)*M]}
		sameInts("engram_hash row", gotE.I64[b*n:(b+1)*n], runOp(t, "engram_hash", hattrs, hb, tok(b), one(b), pad).I64)
	}

	if _, err := kernelsByOp["window_update"](&run{env: &backends.Env{}, node: &ir.Node{Op: "window_update"}}, &ir.Node{Op: "window_update"},
		[]*backends.Tensor{ring, kv, {DType: ir.I64, Shape: []int{B + 1}, I64: make([]int64, B+1)}}); err == nil {
		t.Error("window_update took start positions of 5 rows for 4")
	}
}
