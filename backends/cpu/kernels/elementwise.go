package kernels

import (
	"fmt"
	"math"
	"math/bits"
)

// Elementwise and reduction primitives used by the graph in unfused form.
// All arithmetic is fp32 and rounds after every operation, as torch does on
// fp32 tensors; exp and sqrt are evaluated in float64 and rounded to fp32
// (correctly rounded but for rare double-rounding cases). torch's SLEEF
// routines are not correctly rounded: measured against torch 2.11 on the
// CPU, exp differs by 1 fp32 ulp on ~1% of inputs, sigmoid and silu on ~4%
// (max rel 3e-7); rsqrt is bit-identical. NaN propagates through every
// function (comparisons with NaN are false, so clamps leave it untouched).

// elemExp returns exp(x) rounded to fp32.
func elemExp(x float32) float32 { return float32(math.Exp(float64(x))) }

// elemRsqrt returns 1/sqrt(x) as torch.rsqrt computes it on the CPU: a
// correctly rounded fp32 square root followed by an fp32 division.
func elemRsqrt(x float32) float32 {
	return 1 / float32(math.Sqrt(float64(x)))
}

// elemSigmoid returns 1/(1+exp(-x)) in fp32 (torch's CPU sigmoid).
func elemSigmoid(x float32) float32 { return 1 / (1 + elemExp(-x)) }

// elemSiLU returns x/(1+exp(-x)) in fp32 (torch's CPU F.silu; note the
// division, not x·sigmoid(x), which rounds twice).
func elemSiLU(x float32) float32 { return x / (1 + elemExp(-x)) }

// Sigmoid sets out[i] = 1/(1+exp(-x[i])) (fp32). out may alias x.
func Sigmoid(out, x []float32) {
	for i, v := range x {
		out[i] = elemSigmoid(v)
	}
}

// SiLU sets out[i] = x[i]/(1+exp(-x[i])) (fp32, torch's F.silu). out may
// alias x.
func SiLU(out, x []float32) {
	for i, v := range x {
		out[i] = elemSiLU(v)
	}
}

// Rsqrt sets out[i] = 1/sqrt(x[i]) (fp32 sqrt, then fp32 division). out may
// alias x.
func Rsqrt(out, x []float32) {
	for i, v := range x {
		out[i] = elemRsqrt(v)
	}
}

// Clamp sets out[i] = min(max(x[i], lo), hi) (torch.clamp: NaN stays NaN).
// Pass -Inf or +Inf for a one-sided clamp. out may alias x.
func Clamp(out, x []float32, lo, hi float32) {
	for i, v := range x {
		if v < lo {
			v = lo
		}
		if v > hi {
			v = hi
		}
		out[i] = v
	}
}

// MinScalar sets out[i] = min(x[i], c) (torch.clamp(x, max=c): NaN stays
// NaN). out may alias x.
func MinScalar(out, x []float32, c float32) { Clamp(out, x, float32(math.Inf(-1)), c) }

// Softmax computes a max-subtracted softmax over the last axis of x
// [rows, n]: e_j = exp(x_j − max_j x_j), out_j = e_j / Σ_j e_j with the sum in
// fp32 in ascending j. out may alias x. torch's softmax uses a faster exp
// and agrees to ~6e-7 relative, not bit for bit.
func Softmax(out, x []float32, rows, n int) {
	for r := range rows {
		xr, or := x[r*n:(r+1)*n], out[r*n:(r+1)*n]
		mx := float32(math.Inf(-1))
		for _, v := range xr {
			mx = max(mx, v)
		}
		var sum float32
		for j, v := range xr {
			or[j] = elemExp(v - mx)
			sum += or[j]
		}
		for j := range or {
			or[j] /= sum
		}
	}
}

// MeanSquare sets out[r] = (Σ_j x[r,j]²)/n over the last axis of x
// [rows, n]: every square rounded to fp32, summed in fp32 in torch's CPU
// reduction order (see elemTorchSum), then divided by n in fp32 — as
// torch's x.square().mean(-1) computes it.
func MeanSquare(out, x []float32, rows, n int) {
	sq := make([]float32, n)
	var accs [TorchSumScratch]float32
	for r := range rows {
		for j, v := range x[r*n : (r+1)*n] {
			sq[j] = float32(v * v)
		}
		out[r] = elemTorchSum(sq, accs[:]) / float32(n)
	}
}

// SumAxis sums x (shape `shape`, row-major) over axis `axis` into out, whose
// shape is `shape` without that axis, in fp32. Over the innermost axis the
// order is torch's (elemTorchSum); over any other axis the terms are added
// in ascending index order, which is torch's order for reductions of up to
// 16 terms (longer outer reductions are cascaded by torch and may differ by
// a few fp32 ulps).
func SumAxis(out, x []float32, shape []int, axis int) {
	outer, inner := 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	n := shape[axis]
	if inner == 1 {
		var accs [TorchSumScratch]float32 // (one for every row)
		for o := range outer {
			out[o] = elemTorchSum(x[o*n:(o+1)*n], accs[:])
		}
		return
	}
	for o := range outer {
		for i := range inner {
			var s float32
			for a := range n {
				s += x[(o*n+a)*inner+i]
			}
			out[o*inner+i] = s
		}
	}
}

// Broadcast returns the numpy broadcast of shapes a and b: shapes are
// aligned at their last axis, and each pair of axes must be equal or one of
// them 1 (a missing leading axis counts as 1).
func Broadcast(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := elemDimAt(a, i-n+len(a)), elemDimAt(b, i-n+len(b))
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("kernels.Broadcast: shapes %v and %v do not broadcast (axis %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

// elemDimAt returns shape[i], or 1 for an axis before the first one.
func elemDimAt(shape []int, i int) int {
	if i < 0 {
		return 1
	}
	return shape[i]
}

// elemBinary applies f elementwise over the broadcast of (a, aShape) and
// (b, bShape) into out, which has the broadcast shape.
func elemBinary(op string, out, a []float32, aShape []int, b []float32, bShape []int, f func(x, y float32) float32) {
	shape, err := Broadcast(aShape, bShape)
	if err != nil {
		panic(err)
	}
	n := len(shape)
	as, bs := elemStrides(aShape, n), elemStrides(bShape, n)
	total := 1
	for _, d := range shape {
		total *= d
	}
	if len(out) < total {
		panic(fmt.Sprintf("kernels.%s: out has %d elements, want %d", op, len(out), total))
	}
	idx := make([]int, n)
	for o := range total {
		ai, bi := 0, 0
		for d := range n {
			ai += idx[d] * as[d]
			bi += idx[d] * bs[d]
		}
		out[o] = f(a[ai], b[bi])
		for d := n - 1; d >= 0; d-- { // advance the multi-index
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// elemStrides returns row-major strides of shape right-aligned to n axes,
// with stride 0 on broadcast (size-1 or missing) axes.
func elemStrides(shape []int, n int) []int {
	st := make([]int, n)
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 {
			st[i+n-len(shape)] = s
		}
		s *= shape[i]
	}
	return st
}

// Mul sets out = a·b elementwise (fp32) with numpy broadcasting; out has
// the broadcast shape and must not alias an operand that is broadcast.
func Mul(out, a []float32, aShape []int, b []float32, bShape []int) {
	elemBinary("Mul", out, a, aShape, b, bShape, func(x, y float32) float32 { return x * y })
}

// Add sets out = a+b elementwise (fp32) with numpy broadcasting.
func Add(out, a []float32, aShape []int, b []float32, bShape []int) {
	elemBinary("Add", out, a, aShape, b, bShape, func(x, y float32) float32 { return x + y })
}

// Div sets out = a/b elementwise (fp32, IEEE division) with numpy
// broadcasting.
func Div(out, a []float32, aShape []int, b []float32, bShape []int) {
	elemBinary("Div", out, a, aShape, b, bShape, func(x, y float32) float32 { return x / y })
}

// torch's CPU summation order (aten/src/ATen/native/cpu/SumKernel.cpp,
// cascade_sum → vectorized_inner_sum → row_sum → multi_row_sum). Measured
// bit-exact against torch 2.11 (the version that made the golden data) on
// an AVX-512 host for rows of 5..20480 elements: the sum kernel works on
// Vectorized<float> of 8 lanes there.
const (
	elemSumLanes  = 8 // lanes of one vector
	elemSumILP    = 4 // row_sum: interleaved vector accumulators
	elemSumLevels = 4 // multi_row_sum: cascade levels
)

// elemTorchSum returns Σ x in fp32 in the order torch's CPU kernel uses for
// a reduction over a contiguous innermost axis (x.sum(-1), x.mean(-1)):
//
//   - x is cut into nv = len(x)/8 vectors of 8 lanes (lanes = 1 if
//     len(x) < 8, the scalar path, which is the same algorithm);
//   - the first 4·⌊nv/4⌋ vectors are read as rows of 4 consecutive vectors
//     and summed row by row, lane-wise, by elemCascade into 4 accumulator
//     vectors; the remaining vectors are added to accumulator 0, then
//     accumulators 1, 2, 3 are added to it in turn;
//   - the scalar tail x[8·nv:] is summed from 0 in order, and then the 8
//     lanes of the accumulator are added to it in lane order.
//
// This differs from a sequential sum by a few fp32 ulps; matching it makes
// RMSNorm and the hc ρ bit-exact with the reference.
// accs is TorchSumInto's scratch.
func elemTorchSum(x, accs []float32) float32 { return TorchSumInto(x, addRowsGo, accs) }

// RowAdder adds the rows of x [rows][len(acc)] to acc lane by lane, in row
// order (acc[l] += x[r*len(acc)+l], fp32). TorchSum takes it so that a
// vector version (backends/cpu/fast) runs the same cascade.
type RowAdder func(acc, x []float32, rows int)

func addRowsGo(acc, x []float32, rows int) {
	w := len(acc)
	for r := range rows {
		for l, v := range x[r*w : (r+1)*w] {
			acc[l] += v
		}
	}
}

// TorchSum is elemTorchSum with the lane-wise row additions done by add
// (whose width is 32 = 8 lanes × 4 accumulators whenever len(x) ≥ 8).
func TorchSum(x []float32, add RowAdder) float32 {
	var accs [TorchSumScratch]float32
	return TorchSumInto(x, add, accs[:])
}

// TorchSumScratch is the length of TorchSumInto's scratch.
const TorchSumScratch = elemSumLevels * elemSumLanes * elemSumILP

// TorchSumInto is TorchSum with its accumulators in accs (TorchSumScratch
// elements, any values: it clears them), which a caller summing many rows
// keeps (TorchSum's own escape to the heap through add).
func TorchSumInto(x []float32, add RowAdder, accs []float32) float32 {
	accs = accs[:TorchSumScratch]
	lanes := elemSumLanes
	if len(x) < lanes {
		lanes = 1
	}
	nv := len(x) / lanes
	wide := lanes * elemSumILP
	nRows := nv / elemSumILP
	acc := elemCascade(accs[:elemSumLevels*wide], x[:nRows*wide], wide, add) // 4 accumulators side by side
	a0 := acc[:lanes]
	for v := nRows * elemSumILP; v < nv; v++ {
		for l := range lanes {
			a0[l] += x[v*lanes+l]
		}
	}
	for k := 1; k < elemSumILP; k++ {
		for l := range lanes {
			a0[l] += acc[k*lanes+l]
		}
	}
	var s float32
	for _, v := range x[nv*lanes:] {
		s += v
	}
	for _, v := range a0 {
		s += v
	}
	return s
}

// elemCascade sums the rows of x [len(x)/width, width] lane-wise with
// torch's multi_row_sum: rows are added in order into a level-0
// accumulator; after every 2^p rows (p = max(4, ceilLog2(rows)/4)) level 0
// is folded into level 1, and a level j is folded into level j+1 whenever
// the row count is a multiple of 2^(p·(j+1)); at the end the leftover rows
// go into level 0 and levels 1..3 are added to level 0 in order. accs
// (elemSumLevels·width, any values: it clears them) holds the levels; the
// result is its first width elements.
//
// Up to one fold's rows (a norm's 128 or 512 elements) only level 0 is
// used: the levels above stay zero, and adding a zero, or a fold into a
// zeroed level, changes no lane except -0 to +0, which no sum of
// TorchSumInto sees (it starts from +0).
func elemCascade(accs, x []float32, width int, add RowAdder) []float32 {
	rows := len(x) / width
	p := max(4, elemCeilLog2(rows)/elemSumLevels)
	step, mask := 1<<p, 1<<p-1
	if rows <= step {
		acc := accs[:width]
		clear(acc)
		add(acc, x, rows)
		return acc
	}
	clear(accs[:elemSumLevels*width])
	var acc [elemSumLevels][]float32
	for j := range acc {
		acc[j] = accs[j*width : (j+1)*width]
	}
	i := 0
	for i+step <= rows {
		add(acc[0], x[i*width:(i+step)*width], step)
		i += step
		for j := 1; j < elemSumLevels; j++ {
			for l := range width {
				acc[j][l] += acc[j-1][l]
				acc[j-1][l] = 0
			}
			if i&(mask<<(j*p)) != 0 {
				break
			}
		}
	}
	add(acc[0], x[i*width:rows*width], rows-i)
	for j := 1; j < elemSumLevels; j++ {
		for l := range width {
			acc[0][l] += acc[j][l]
		}
	}
	return acc[0]
}

// elemCeilLog2 is c10's CeilLog2: 1 for n <= 2, else ceil(log2(n)).
func elemCeilLog2(n int) int {
	if n <= 2 {
		return 1
	}
	return bits.Len(uint(n - 1))
}
