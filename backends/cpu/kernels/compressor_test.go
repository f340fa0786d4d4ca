package kernels

import (
	"math"
	"slices"
	"testing"
)

func TestCompressorPool2Small(t *testing.T) {
	ninf := float32(math.Inf(-1))
	// prefill b=1, s=3, d=1: group 0 = tokens 0,1; token 2 -> state slot 0.
	c := []float32{1, 3, 5}
	z := []float32{0, 0, 7}
	kvs := []float32{0, 0}
	scs := []float32{ninf, ninf}
	out := make([]float32, 1)
	if g := compressorPool2(out, c, z, 1, 3, 1, kvs, scs, 0); g != 1 || out[0] != 2 {
		t.Fatalf("prefill: groups %d out %v", g, out)
	}
	if !slices.Equal(kvs, []float32{5, 0}) || scs[0] != 7 || !math.IsInf(float64(scs[1]), -1) {
		t.Fatalf("state %v %v", kvs, scs)
	}
	// decode at position 3 completes the group {2, 3}.
	if g := compressorPool2(out, []float32{9}, []float32{7}, 1, 1, 1, kvs, scs, 3); g != 1 || out[0] != 7 {
		t.Fatalf("decode: groups %d out %v", g, out)
	}
	// decode at position 4 only fills slot 0.
	out[0] = -1
	if g := compressorPool2(out, []float32{2}, []float32{1}, 1, 1, 1, kvs, scs, 4); g != 0 || out[0] != -1 || kvs[0] != 2 {
		t.Fatalf("decode slot 0: groups %d out %v state %v", g, out, kvs)
	}
	// Different scores: weights e/(1+e) computed in fp32.
	compressorPool2(out, []float32{4}, []float32{0}, 1, 1, 1, kvs, scs, 5)
	e := float32(math.Exp(-1))
	if want := float32(2*(1/(1+e))) + float32(4*(e/(1+e))); out[0] != want {
		t.Fatalf("pool = %v, want %v", out[0], want)
	}
}

func compressorPool2(out, c, z []float32, b, s, d int, kvState, scoreState []float32, startPos int) int {
	return CompressorPool(out, c, z, b, s, d, 2, kvState, scoreState, startPos)
}

// TestCompressorPoolKeepsNegativeZero: a group whose products are all −0
// pools to −0, as the reference's sum of the products does.
func TestCompressorPoolKeepsNegativeZero(t *testing.T) {
	for _, r := range []int{2, 3} {
		c := make([]float32, r)
		z := make([]float32, r)
		for i := range c {
			c[i] = float32(math.Copysign(0, -1))
		}
		out := []float32{1}
		CompressorPool(out, c, z, 1, r, 1, r, make([]float32, r), make([]float32, r), 0)
		if out[0] != 0 || !math.Signbit(float64(out[0])) {
			t.Errorf("ratio %d: pooled %v, want -0", r, out[0])
		}
	}
}
