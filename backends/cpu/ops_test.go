package cpu

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// runOp runs the fast CPU kernel of op on args (no arena, no plan).
func runOp(t *testing.T, op string, attrs ir.Attrs, args ...*backends.Tensor) *backends.Tensor {
	t.Helper()
	return runOpKernels(t, true, op, attrs, args...)
}

// runOpKernels is runOp with the fast (backend cpu) or the reference
// (backend cpu-ref) kernels.
func runOpKernels(t *testing.T, fast bool, op string, attrs ir.Attrs, args ...*backends.Tensor) *backends.Tensor {
	t.Helper()
	n := &ir.Node{Op: op, Attrs: attrs}
	out, err := kernelsByOp[op](&run{env: &backends.Env{}, node: n, fast: fast}, n, args)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return out
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

func randTensor(r *rand.Rand, dt ir.DType, shape ...int) *backends.Tensor {
	t := &backends.Tensor{DType: dt, Shape: shape}
	t.F32 = make([]float32, t.NumElements())
	for i := range t.F32 {
		t.F32[i] = float32(r.NormFloat64() * 3)
	}
	return t
}

// TestChunkedElementwiseOps checks the ops that split large tensors over
// the worker pool (cast, fp4_quant, rope, moe_combine, the unary and binary
// elementwise ops, act_quant's reference path) against one call of
// the underlying function over the whole tensor, bit for bit, on sizes well
// above the chunking threshold (kernels.ParallelChunks) and not multiples of its chunk.
func TestChunkedElementwiseOps(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))

	x := randTensor(r, ir.F32, 3, 70001)
	want := append([]float32(nil), x.F32...)
	numfmt.BF16RoundSlice(want)
	sameBits(t, "cast", runOp(t, "cast", ir.Attrs{"to": "bf16"}, x).F32, want)

	// act_quant's reference path (the fast one has its own tests)
	aq := randTensor(r, ir.BF16, 7, 32*300)
	wantQ := append([]float32(nil), aq.F32...)
	numfmt.ActQuantInplace(wantQ, 32)
	gotQ := runOpKernels(t, false, "act_quant", ir.Attrs{"block": int64(32)}, aq).F32
	sameBits(t, "act_quant (reference path)", gotQ, wantQ)

	for _, scale := range []string{"e8m0", "e4m3"} {
		q := randTensor(r, ir.BF16, 5, 41*32*16)
		want := append([]float32(nil), q.F32...)
		if scale == "e4m3" {
			numfmt.FP4ActQuantE4M3(want, 16, nil, nil)
		} else {
			numfmt.FP4ActQuantE8M0(want, 16, nil, nil)
		}
		sameBits(t, "fp4_quant "+scale, runOp(t, "fp4_quant", ir.Attrs{"block": int64(16), "scale": scale}, q).F32, want)
	}

	// binary with broadcasting, and a unary op
	bx, by := randTensor(r, ir.BF16, 3, 70001), randTensor(r, ir.BF16, 70001)
	wantAdd := make([]float32, 3*70001)
	for i := range wantAdd {
		wantAdd[i] = bx.F32[i] + by.F32[i%70001]
	}
	numfmt.BF16RoundSlice(wantAdd)
	sameBits(t, "add", runOp(t, "add", nil, bx, by).F32, wantAdd)
	wantMul := make([]float32, len(bx.F32))
	for i, v := range bx.F32 {
		wantMul[i] = v * 0.75
	}
	numfmt.BF16RoundSlice(wantMul)
	sameBits(t, "mul_scalar", runOp(t, "mul_scalar", ir.Attrs{"value": 0.75}, bx).F32, wantMul)

	const B, T, H, W, rd, maxPos = 2, 37, 16, 96, 64, 64
	xr := randTensor(r, ir.BF16, B, T, H, W)
	tab := randTensor(r, ir.F32, maxPos, rd)
	pos := &backends.Tensor{DType: ir.I64, Shape: []int{T}, I64: make([]int64, T)}
	ps := make([]int, B*T*H)
	for i := range pos.I64 {
		pos.I64[i] = int64(r.IntN(maxPos))
	}
	for i := range ps {
		ps[i] = int(pos.I64[(i/H)%T])
	}
	for _, inverse := range []bool{false, true} {
		want := append([]float32(nil), xr.F32...)
		kernels.Rotary(want, B*T*H, W, rd, tab.F32, ps, inverse)
		numfmt.BF16RoundSlice(want)
		got := runOp(t, "rope", ir.Attrs{"dim": int64(rd), "inverse": inverse}, xr, tab, pos).F32
		sameBits(t, "rope", got, want)
	}

	const N, k, D = 300, 6, 512
	y := randTensor(r, ir.F32, N, k, D)
	idx := &backends.Tensor{DType: ir.I64, Shape: []int{N, k}, I64: make([]int64, N*k)}
	for i := range idx.I64 {
		idx.I64[i] = int64(r.IntN(64))
	}
	wantC := make([]float32, N*D)
	for i := range N {
		ord := []int{0, 1, 2, 3, 4, 5}
		sort.Slice(ord, func(p, q int) bool { return idx.I64[i*k+ord[p]] < idx.I64[i*k+ord[q]] })
		for _, j := range ord {
			for d := range D {
				wantC[i*D+d] += y.F32[(i*k+j)*D+d]
			}
		}
	}
	sameBits(t, "moe_combine", runOp(t, "moe_combine", nil, y, idx).F32, wantC)
}

// TestRopeRowPositions: rope with positions i64[B,T] (a ragged call's:
// each row its own) rotates row b as rope of that row alone with its
// positions i64[T], bit for bit.
func TestRopeRowPositions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const B, T, H, W, D, L = 3, 2, 4, 16, 8, 40
	x := randTensor(r, ir.F32, B, T, H, W)
	tab := randTensor(r, ir.F32, L, D/2, 2)
	pos := &backends.Tensor{DType: ir.I64, Shape: []int{B, T}, I64: []int64{0, 1, 7, 8, 30, 31}}
	attrs := ir.Attrs{"dim": int64(D)}
	got := runOp(t, "rope", attrs, x, tab, pos)
	n := T * H * W
	for b := range B {
		xb := &backends.Tensor{DType: ir.F32, Shape: []int{1, T, H, W}, F32: x.F32[b*n : (b+1)*n]}
		pb := &backends.Tensor{DType: ir.I64, Shape: []int{T}, I64: pos.I64[b*T : (b+1)*T]}
		sameBits(t, "rope row", got.F32[b*n:(b+1)*n], runOp(t, "rope", attrs, xb, tab, pb).F32)
	}
}
