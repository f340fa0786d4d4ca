package kernels

import "testing"

const (
	expertTestRows  = 6
	expertTestDim   = 128
	expertTestInter = 64
	expertTestLimit = 10
)

func TestExpertFP4Golden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	x := gemmF32(t, f, "expert.x")
	rw := gemmF32(t, f, "expert_fp4.route_weight")
	w1, s1 := gemmBytes(t, f, "expert_fp4.w1.packed"), gemmBytes(t, f, "expert_fp4.w1.scale")
	w3, s3 := gemmBytes(t, f, "expert_fp4.w3.packed"), gemmBytes(t, f, "expert_fp4.w3.scale")
	w2, s2 := gemmBytes(t, f, "expert_fp4.w2.packed"), gemmBytes(t, f, "expert_fp4.w2.scale")
	const rows, dim, inter = expertTestRows, expertTestDim, expertTestInter

	out := make([]float32, rows*dim)
	g, u := expertForward(out, x, rows, dim, inter,
		func(o, a []float32, m int) { MatmulFP4(o, a, m, dim, w1, s1, inter) },
		func(o, a []float32, m int) { MatmulFP4(o, a, m, dim, w3, s3, inter) },
		func(o, a []float32, m int) { MatmulFP4(o, a, m, inter, w2, s2, dim) },
		expertTestLimit, rw)
	gemmCheckULP(t, "expert_fp4.w1_out", g, gemmF32(t, f, "expert_fp4.w1_out"))
	gemmCheckULP(t, "expert_fp4.w3_out", u, gemmF32(t, f, "expert_fp4.w3_out"))
	gemmCheckULP(t, "expert_fp4.out", out, gemmF32(t, f, "expert_fp4.out"))
	expertCheckClamps(t, "fp4", g, u, 1, 3)

	out2 := make([]float32, rows*dim)
	ExpertFP4(out2, x, rows, dim, inter, w1, s1, w3, s3, w2, s2, expertTestLimit, rw)
	for i := range out {
		if out[i] != out2[i] {
			t.Fatalf("ExpertFP4 differs from expertForward at %d", i)
		}
	}
}

func TestExpertFP8Golden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	x := gemmF32(t, f, "expert.x")
	w1, s1 := gemmBytes(t, f, "expert_fp8.w1.weight"), gemmBytes(t, f, "expert_fp8.w1.scale")
	w3, s3 := gemmBytes(t, f, "expert_fp8.w3.weight"), gemmBytes(t, f, "expert_fp8.w3.scale")
	w2, s2 := gemmBytes(t, f, "expert_fp8.w2.weight"), gemmBytes(t, f, "expert_fp8.w2.scale")
	const rows, dim, inter = expertTestRows, expertTestDim, expertTestInter

	out := make([]float32, rows*dim)
	g, u := expertForward(out, x, rows, dim, inter,
		func(o, a []float32, m int) { MatmulFP8(o, a, m, dim, w1, s1, inter) },
		func(o, a []float32, m int) { MatmulFP8(o, a, m, dim, w3, s3, inter) },
		func(o, a []float32, m int) { MatmulFP8(o, a, m, inter, w2, s2, dim) },
		expertTestLimit, nil)
	gemmCheckULP(t, "expert_fp8.w1_out", g, gemmF32(t, f, "expert_fp8.w1_out"))
	gemmCheckULP(t, "expert_fp8.w3_out", u, gemmF32(t, f, "expert_fp8.w3_out"))
	gemmCheckULP(t, "expert_fp8.out", out, gemmF32(t, f, "expert_fp8.out"))
	expertCheckClamps(t, "fp8", g, u, 5, 3)

	out2 := make([]float32, rows*dim)
	ExpertFP8(out2, x, rows, dim, inter, w1, s1, w3, s3, w2, s2, expertTestLimit, nil)
	for i := range out {
		if out[i] != out2[i] {
			t.Fatalf("ExpertFP8 differs from expertForward at %d", i)
		}
	}
}

// expertCheckClamps checks the clamp counts recorded in ops.json
// (expert.{fp4,fp8}.{gate,up}_clamped): the golden exercises both clamps.
func expertCheckClamps(t *testing.T, name string, g, u []float32, wantGate, wantUp int) {
	t.Helper()
	var ng, nu int
	for i := range g {
		if g[i] > expertTestLimit {
			ng++
		}
		if u[i] > expertTestLimit || u[i] < -expertTestLimit {
			nu++
		}
	}
	if ng != wantGate || nu != wantUp {
		t.Errorf("%s: %d gate / %d up values clamped, ops.json says %d / %d", name, ng, nu, wantGate, wantUp)
	}
}

func TestSwiGLUClamp(t *testing.T) {
	g := []float32{20, -3, 0.5}
	u := []float32{-50, 2, 11}
	out := make([]float32, 3)
	SwiGLUClamp(out, g, u, 1, 3, 10, []float32{0.5})
	// g=min(20,10)=10: silu(10)·(-10)·0.5; g=-3 not clamped from below; u=11 -> 10.
	want := []float32{float32(elemSiLU(10)*-10) * 0.5, float32(elemSiLU(-3)*2) * 0.5, float32(elemSiLU(0.5)*10) * 0.5}
	for i := range want {
		if d := ulpDiff(out[i], want[i]); d != 0 {
			t.Errorf("SwiGLUClamp[%d] = %g, want %g", i, out[i], want[i])
		}
	}
}
