package kernels

import "testing"

// TestRotaryGolden: ops recipe apply_rotary_emb(x, freqs[3:8]) on x
// [b=2, s=5, h=3, 16] with freqs = freqs_cis.tiny_compressed (the only
// table/offset that matches; tiny_window does not): sequence index s uses
// table row 3+s (ops.json rotary.positions), broadcast over b and h.
func TestRotaryGolden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	const b, s, h, d = 2, 5, 3, 16
	rows := b * s * h
	pos := make([]int, rows)
	for r := range pos {
		pos[r] = 3 + (r/h)%s
	}
	table := gemmF32(t, f, "freqs_cis.tiny_compressed")
	x := gemmF32(t, f, "rotary.x")
	Rotary(x, rows, d, d, table, pos, false)
	want := gemmF32(t, f, "rotary.out")
	gemmCheckULP(t, "rotary.out", x, want)

	y := append([]float32(nil), want...)
	Rotary(y, rows, d, d, table, pos, true)
	gemmCheckULP(t, "rotary.inverse_of_out", y, gemmF32(t, f, "rotary.inverse_of_out"))
}

func TestRotaryTail(t *testing.T) {
	// width 4, ropeDim 2: channels 0,1 untouched; (x2 + i x3)·(0 + i) = -x3 + i x2.
	x := []float32{7, 8, 1, 2}
	Rotary(x, 1, 4, 2, []float32{1, 0, 0, 1}, []int{1}, false)
	if x[0] != 7 || x[1] != 8 || x[2] != -2 || x[3] != 1 {
		t.Fatalf("Rotary = %v, want [7 8 -2 1]", x)
	}
	Rotary(x, 1, 4, 2, []float32{1, 0, 0, 1}, []int{1}, true)
	if x[2] != 1 || x[3] != 2 {
		t.Fatalf("inverse Rotary = %v, want [7 8 1 2]", x)
	}
}
