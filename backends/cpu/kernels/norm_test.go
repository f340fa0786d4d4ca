package kernels

import "testing"

func TestRMSNormGolden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	x := gemmF32(t, f, "rmsnorm.x")
	out := make([]float32, len(x))
	RMSNorm(out, x, 4, 128, gemmF32(t, f, "rmsnorm.weight"), 1e-20)
	gemmCheckULP(t, "rmsnorm.out", out, gemmF32(t, f, "rmsnorm.out"))
}
