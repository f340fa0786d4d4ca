package kernels

import (
	"math"
	"slices"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
)

// elemTorchRows are x.sum(-1) and x.square().mean(-1) of 4 rows of n bf16
// values, computed by torch 2.11 on the CPU (AVX-512 host, the golden data's
// torch), as fp32 bits. Row r, element i:
// x = bf16((((i·7919 + r·104729) mod 2001) − 1000)·(r+1)/64).
var elemTorchRows = []struct {
	n        int
	sum, msq [4]uint32
}{
	{5, [4]uint32{0x42068000, 0xc29a0000, 0x422ca000, 0x43100000}, [4]uint32{0x432be533, 0x437b34cd, 0x42d4cc1a, 0x45322a00}},
	{7, [4]uint32{0x42494000, 0xc2fcc000, 0x42021000, 0x43568000}, [4]uint32{0x430ecbdb, 0x43b107b7, 0x42aa70ce, 0x4515956e}},
	{13, [4]uint32{0x4288e000, 0xc1ce0000, 0xc2be1800, 0x43953000}, [4]uint32{0x42a6f18f, 0x44014f62, 0x4389f961, 0x44b11f71}},
	{100, [4]uint32{0x41bcc000, 0xc2b06000, 0x421ed000, 0x438d2000}, [4]uint32{0x42abea96, 0x43a20ec4, 0x442e213b, 0x44acd7d8}},
	{128, [4]uint32{0x425ce000, 0xc2f15000, 0xc26a4000, 0x43a7e000}, [4]uint32{0x42a6a068, 0x43aa8338, 0x442b9496, 0x44a7d1c8}},
	{1000, [4]uint32{0x4283d800, 0xc2c38000, 0xc2eaa800, 0x4383a000}, [4]uint32{0x42a33f9b, 0x43a40a57, 0x4435c2ef, 0x44a367a7}},
	{5120, [4]uint32{0x4296e000, 0xc2a65000, 0xc2cdd000, 0x43881800}, [4]uint32{0x42a2fa03, 0x43a325e6, 0x4436fbc0, 0x44a301da}},
	{20480, [4]uint32{0xc1aa4000, 0xc2266000, 0xc275e000, 0x4238c000}, [4]uint32{0x42a2ea17, 0x43a2ee15, 0x44374ada, 0x44a2ea5a}},
}

func TestTorchSumOrder(t *testing.T) {
	for _, c := range elemTorchRows {
		x := make([]float32, 4*c.n)
		for r := range 4 {
			for i := range c.n {
				k := (i*7919+r*104729)%2001 - 1000
				x[r*c.n+i] = numfmt.BF16Round(float32(k*(r+1)) / 64)
			}
		}
		sum, msq := make([]float32, 4), make([]float32, 4)
		SumAxis(sum, x, []int{4, c.n}, 1)
		MeanSquare(msq, x, 4, c.n)
		for r := range 4 {
			if math.Float32bits(sum[r]) != c.sum[r] {
				t.Errorf("n=%d row %d: sum %g, torch %g", c.n, r, sum[r], math.Float32frombits(c.sum[r]))
			}
			if math.Float32bits(msq[r]) != c.msq[r] {
				t.Errorf("n=%d row %d: mean square %g, torch %g", c.n, r, msq[r], math.Float32frombits(c.msq[r]))
			}
		}
	}
}

func TestBroadcastOps(t *testing.T) {
	if s, err := Broadcast([]int{2, 1, 3}, []int{4, 1}); err != nil || !slices.Equal(s, []int{2, 4, 3}) {
		t.Fatalf("Broadcast = %v, %v; want [2 4 3]", s, err)
	}
	if _, err := Broadcast([]int{2, 3}, []int{2}); err == nil {
		t.Fatal("Broadcast([2 3], [2]) did not fail")
	}
	a := []float32{1, 2, 3, 4, 5, 6} // [2,3]
	out := make([]float32, 6)
	Mul(out, a, []int{2, 3}, []float32{10, 100, 1000}, []int{3})
	if !slices.Equal(out, []float32{10, 200, 3000, 40, 500, 6000}) {
		t.Errorf("Mul = %v", out)
	}
	Add(out, a, []int{2, 3}, []float32{10, 20}, []int{2, 1})
	if !slices.Equal(out, []float32{11, 12, 13, 24, 25, 26}) {
		t.Errorf("Add = %v", out)
	}
	Div(out, a, []int{2, 3}, []float32{2}, []int{1})
	if !slices.Equal(out, []float32{0.5, 1, 1.5, 2, 2.5, 3}) {
		t.Errorf("Div = %v", out)
	}
	// Both operands broadcast: [2,1] + [1,3] -> [2,3].
	Add(out, []float32{1, 2}, []int{2, 1}, []float32{10, 20, 30}, []int{1, 3})
	if !slices.Equal(out, []float32{11, 21, 31, 12, 22, 32}) {
		t.Errorf("Add outer = %v", out)
	}
}

func TestReductionsAndUnary(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6} // [2,3]
	s0 := make([]float32, 3)
	SumAxis(s0, x, []int{2, 3}, 0)
	if !slices.Equal(s0, []float32{5, 7, 9}) {
		t.Errorf("SumAxis(0) = %v", s0)
	}
	s1 := make([]float32, 2)
	SumAxis(s1, x, []int{2, 3}, 1)
	if !slices.Equal(s1, []float32{6, 15}) {
		t.Errorf("SumAxis(1) = %v", s1)
	}
	MeanSquare(s1, x, 2, 3)
	if s1[0] != float32(14)/3 || s1[1] != float32(77)/3 {
		t.Errorf("MeanSquare = %v", s1)
	}
	sm := make([]float32, 3)
	Softmax(sm, []float32{1000, 1000, math.MaxFloat32}, 1, 3) // max-subtracted: no overflow
	if sm[2] != 1 || sm[0] != 0 {
		t.Errorf("Softmax = %v", sm)
	}
	Softmax(sm, []float32{0, 0, 0}, 1, 3)
	if sm[0] != float32(1)/3 {
		t.Errorf("Softmax uniform = %v", sm)
	}
	c := []float32{-20, 5, 20, float32(math.NaN())}
	Clamp(c, c, -10, 10)
	if c[0] != -10 || c[1] != 5 || c[2] != 10 || c[3] == c[3] {
		t.Errorf("Clamp = %v", c)
	}
	m := []float32{-20, 20}
	MinScalar(m, m, 10)
	if m[0] != -20 || m[1] != 10 {
		t.Errorf("MinScalar = %v", m)
	}
	u := []float32{0, 4}
	Sigmoid(u[:1], u[:1])
	Rsqrt(u[1:], u[1:])
	if u[0] != 0.5 || u[1] != 0.5 {
		t.Errorf("Sigmoid(0), Rsqrt(4) = %v", u)
	}
	v := []float32{0, -100}
	SiLU(v, v)
	if v[0] != 0 || v[1] > 0 || v[1] < -1e-40 { // -100/(1+e^100) ≈ -3.7e-42
		t.Errorf("SiLU = %v", v)
	}
}
