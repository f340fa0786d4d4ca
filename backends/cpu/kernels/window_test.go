package kernels

import (
	"fmt"
	"slices"
	"testing"
)

func TestWindowIdxGolden(t *testing.T) {
	g, _, _ := attentionTestFiles(t)
	const b, s, window = 2, 29, 8
	want := attentionTestI32(t, g, "prefill.L0.attn_idxs")
	got := WindowIdxPrefill(s, window)
	for bi := 0; bi < b; bi++ {
		if !slices.Equal(got, want[bi*s*window:(bi+1)*s*window]) {
			t.Fatalf("prefill window idx batch %d:\n got %v\nwant %v", bi, got, want[bi*s*window:(bi+1)*s*window])
		}
	}
	for i := 0; i < 12; i++ {
		want := attentionTestI32(t, g, fmt.Sprintf("decode%02d.L0.attn_idxs", i))
		got := WindowIdxDecode(s+i, window)
		for bi := 0; bi < b; bi++ {
			if !slices.Equal(got, want[bi*window:(bi+1)*window]) {
				t.Fatalf("decode%02d window idx: got %v want %v", i, got, want[bi*window:(bi+1)*window])
			}
		}
	}
}

func TestWindowIdxSmall(t *testing.T) {
	if got, want := WindowIdxPrefill(3, 4), []int32{0, -1, -1, 0, 1, -1, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("prefill(3,4) = %v, want %v", got, want)
	}
	if got, want := WindowIdxPrefill(5, 2), []int32{0, -1, 0, 1, 1, 2, 2, 3, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("prefill(5,2) = %v, want %v", got, want)
	}
	// Ring still filling: position 2 of a 4-slot ring.
	if got, want := WindowIdxDecode(2, 4), []int32{-1, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("decode(2,4) = %v, want %v", got, want)
	}
	if got, want := WindowIdxDecode(7, 4), []int32{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("decode(7,4) = %v, want %v", got, want)
	}
	if got, want := WindowIdxDecode(9, 4), []int32{2, 3, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("decode(9,4) = %v, want %v", got, want)
	}
}

func TestWindowWrite(t *testing.T) {
	// s = 5 tokens into a 3-slot ring (d = 1): slots hold positions 3, 4, 2.
	ring := make([]float32, 3)
	WindowWritePrefill(ring, 1, 3, 1, []float32{0, 1, 2, 3, 4}, 5)
	if want := []float32{3, 4, 2}; !slices.Equal(ring, want) {
		t.Fatalf("ring %v, want %v", ring, want)
	}
	WindowWriteDecode(ring, 1, 3, 1, []float32{5}, 5)
	if want := []float32{3, 4, 5}; !slices.Equal(ring, want) {
		t.Fatalf("ring %v, want %v", ring, want)
	}
	ring = make([]float32, 2*4*1)
	WindowWritePrefill(ring, 2, 4, 1, []float32{1, 2, 10, 20}, 2)
	if want := []float32{1, 2, 0, 0, 10, 20, 0, 0}; !slices.Equal(ring, want) {
		t.Fatalf("ring %v, want %v", ring, want)
	}
}
