package kernels

import (
	"math"
	"testing"
)

func TestGateOps(t *testing.T) {
	_, ops, _ := attentionTestFiles(t)
	x := attentionTestF32(t, ops, "gate.x")
	w := attentionTestF32(t, ops, "gate.weight")
	bias := attentionTestF32(t, ops, "gate.bias")
	wantW := attentionTestF32(t, ops, "gate.weights")
	wantI := attentionTestI64(t, ops, "gate.indices")
	const n, dim, experts, topk = 10, 128, 8, 3
	gotW := make([]float32, n*topk)
	gotI := make([]int64, n*topk)
	Gate(gotW, gotI, x, n, dim, w, bias, experts, topk, 1.5, "sqrtsoftplus")
	var maxRel float64
	exact := 0
	for i := range wantI {
		if gotI[i] != wantI[i] {
			t.Errorf("indices[%d][%d] = %d, want %d", i/topk, i%topk, gotI[i], wantI[i])
		}
		if gotW[i] == wantW[i] {
			exact++
		}
		maxRel = max(maxRel, math.Abs(float64(gotW[i]-wantW[i]))/math.Abs(float64(wantW[i])))
	}
	t.Logf("gate: weights bit-exact %d/%d, max rel err %.3g", exact, len(wantW), maxRel)
	if maxRel > 1e-6 {
		t.Errorf("gate weights: max rel err %.3g > 1e-6", maxRel)
	}
}

func TestGateTiesAndThreshold(t *testing.T) {
	// Equal logits: lower expert id first. Logit 30 > 20 uses softplus(x) = x.
	x := []float32{1}
	w := []float32{0, 0, 30, 0}
	gotW := make([]float32, 2)
	gotI := make([]int64, 2)
	Gate(gotW, gotI, x, 1, 1, w, nil, 4, 2, 1, "sqrtsoftplus")
	if gotI[0] != 2 || gotI[1] != 0 {
		t.Fatalf("indices %v, want [2 0]", gotI)
	}
	s0 := float32(math.Sqrt(30))
	s1 := float32(math.Sqrt(float64(float32(math.Log1p(1)))))
	den := s0 + s1 + float32(1e-20)
	if gotW[0] != s0/den || gotW[1] != s1/den {
		t.Fatalf("weights %v, want [%v %v]", gotW, s0/den, s1/den)
	}
}
