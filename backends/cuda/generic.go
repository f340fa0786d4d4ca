package cuda

import (
	"encoding/binary"
	"fmt"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// The graph's unfused ops (generic.cuh). Shapes are row-major; every output
// is contiguous. roundBF16 rounds the result to bf16 (the output dtype is
// bf16), as the cpu backend's round() does.

// maxRank is the largest rank of the strided kernels (MAX_RANK in generic.cuh).
const maxRank = 6

// stridesBytes is the C layout of struct Strides: int rank, int dim[6],
// then two long long[6] stride arrays (at byte 32 and 80), 128 bytes.
func stridesBytes(dims, a, b []int) ([]byte, error) {
	if len(dims) > maxRank || len(a) != len(dims) || len(b) != len(dims) {
		return nil, fmt.Errorf("cuda: rank %d (strides %d, %d) is not supported (at most %d)", len(dims), len(a), len(b), maxRank)
	}
	buf := make([]byte, 128)
	binary.LittleEndian.PutUint32(buf, uint32(len(dims)))
	for i, d := range dims {
		binary.LittleEndian.PutUint32(buf[4+4*i:], uint32(d))
		binary.LittleEndian.PutUint64(buf[32+8*i:], uint64(int64(a[i])))
		binary.LittleEndian.PutUint64(buf[80+8*i:], uint64(int64(b[i])))
	}
	return buf, nil
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// contiguous returns the row-major strides of shape.
func contiguous(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

// broadcastStrides returns the numpy broadcast of a and b and each
// operand's strides over it (0 on broadcast axes).
func broadcastStrides(a, b []int) (shape, sa, sb []int, err error) {
	n := max(len(a), len(b))
	shape = make([]int, n)
	sa, sb = make([]int, n), make([]int, n)
	ca, cb := contiguous(a), contiguous(b)
	for i := range n {
		ia, ib := i-n+len(a), i-n+len(b)
		da, db := 1, 1
		if ia >= 0 {
			da = a[ia]
		}
		if ib >= 0 {
			db = b[ib]
		}
		switch {
		case da == db || db == 1:
			shape[i] = da
		case da == 1:
			shape[i] = db
		default:
			return nil, nil, nil, fmt.Errorf("cuda: shapes %v and %v do not broadcast", a, b)
		}
		if ia >= 0 && da != 1 {
			sa[i] = ca[ia]
		}
		if ib >= 0 && db != 1 {
			sb[i] = cb[ib]
		}
	}
	return shape, sa, sb, nil
}

// UnaryOps maps the graph's unary op names to unary_op's codes (the order
// of the enum in generic.cuh).
var UnaryOps = map[string]int{
	"cast": 0, "sigmoid": 1, "silu": 2, "rsqrt": 3, "sqrt": 4, "exp": 5, "relu": 6,
	"softplus": 7, "clamp": 8, "add_scalar": 9, "mul_scalar": 10,
}

// Unary applies op elementwise over n values (p0, p1: clamp's lo and hi, or
// the scalar of add_scalar/mul_scalar in p0). out may alias x.
func (k *Kernels) Unary(s *driver.Stream, what string, out, x driver.Ptr, n int, op string, p0, p1 float32, roundBF16 bool) error {
	code, ok := UnaryOps[op]
	if !ok {
		return fmt.Errorf("cuda: no unary op %q", op)
	}
	g, b := grid1(n)
	return k.launch(s, "unary_op", what, g, b, 0, driver.P(out), driver.P(x), driver.L(n), driver.I(code), driver.F(p0), driver.F(p1), driver.I(b2i(roundBF16)))
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// binaryOps maps the graph's binary op names to binary_op's codes.
var binaryOps = map[string]int{"add": 0, "sub": 1, "mul": 2, "div": 3}

// Binary computes out = a op b with numpy broadcasting; out has the
// broadcast shape, which it returns.
func (k *Kernels) Binary(s *driver.Stream, what string, out, a driver.Ptr, aShape []int, b driver.Ptr, bShape []int, op string, roundBF16 bool) ([]int, error) {
	code, ok := binaryOps[op]
	if !ok {
		return nil, fmt.Errorf("cuda: no binary op %q", op)
	}
	shape, sa, sb, err := broadcastStrides(aShape, bShape)
	if err != nil {
		return nil, err
	}
	st, err := stridesBytes(shape, sa, sb)
	if err != nil {
		return nil, err
	}
	n := numel(shape)
	if n == 0 {
		return shape, nil
	}
	g, bl := grid1(n)
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	return shape, s.LaunchBytes(k.fn["binary_op"], g, bl, 0, what, le(uint64(out)), le(uint64(a)), le(uint64(b)), le(uint64(n)),
		le(uint64(code)), le(uint64(b2i(roundBF16))), st)
}

// CopyStrided copies every index of dims from in (strides inStrides, in
// elements) to out (strides outStrides); elem is 4 or 8 bytes. Slices,
// concatenations (one copy per part, out offset), expansions (stride 0),
// cache and window writes are all such copies; the pointers may be offset.
func (k *Kernels) CopyStrided(s *driver.Stream, what string, out, in driver.Ptr, elem int, dims, inStrides, outStrides []int) error {
	if elem != 4 && elem != 8 {
		return fmt.Errorf("cuda copy for %s: element size %d", what, elem)
	}
	st, err := stridesBytes(dims, inStrides, outStrides)
	if err != nil {
		return err
	}
	n := numel(dims)
	if n == 0 {
		return nil
	}
	g, bl := grid1(n)
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	return s.LaunchBytes(k.fn["copy_strided"], g, bl, 0, what, le(uint64(out)), le(uint64(in)), le(uint64(elem)), le(uint64(n)), st)
}

// rowWarps is the launch of the one-warp-a-row kernels.
func rowWarps(rows int) (driver.Dim3, driver.Dim3) {
	const warps = 4
	return driver.Dim3{X: uint32(ceilDiv(rows, warps)), Y: 1, Z: 1}, driver.Dim3{X: 32 * warps, Y: 1, Z: 1}
}

// MeanSq is the mean_sq op over the last axis of x [rows, n].
func (k *Kernels) MeanSq(s *driver.Stream, what string, out, x driver.Ptr, rows, n int, roundBF16 bool) error {
	g, b := rowWarps(rows)
	return k.launch(s, "mean_sq", what, g, b, 0, driver.P(out), driver.P(x), driver.I(rows), driver.I(n), driver.I(b2i(roundBF16)))
}

// Sum is kernels.SumAxis of x (shape) over axis.
func (k *Kernels) Sum(s *driver.Stream, what string, out, x driver.Ptr, shape []int, axis int, roundBF16 bool) error {
	if axis < 0 || axis >= len(shape) {
		return fmt.Errorf("cuda sum for %s: axis %d of shape %v", what, axis, shape)
	}
	outer, inner, n := numel(shape[:axis]), numel(shape[axis+1:]), shape[axis]
	if inner == 1 {
		g, b := rowWarps(outer)
		return k.launch(s, "sum_inner", what, g, b, 0, driver.P(out), driver.P(x), driver.I(outer), driver.I(n), driver.I(b2i(roundBF16)))
	}
	g, b := grid1(outer * inner)
	return k.launch(s, "sum_outer", what, g, b, 0, driver.P(out), driver.P(x), driver.I(outer), driver.I(n), driver.I(inner), driver.I(b2i(roundBF16)))
}

// Softmax is kernels.Softmax over the last axis of x [rows, n].
func (k *Kernels) Softmax(s *driver.Stream, what string, out, x driver.Ptr, rows, n int, roundBF16 bool) error {
	g, b := rowWarps(rows)
	return k.launch(s, "softmax_rows", what, g, b, 0, driver.P(out), driver.P(x), driver.I(rows), driver.I(n), driver.I(b2i(roundBF16)))
}

// TopkIdx is the topk_idx op: out int64 [rows, k], the positions of the k
// largest of each row of x [rows, e] in descending order (ties: lower first).
func (k *Kernels) TopkIdx(s *driver.Stream, what string, out, x driver.Ptr, rows, e, kk int) error {
	if kk > e {
		return fmt.Errorf("cuda topk_idx for %s: k %d > %d", what, kk, e)
	}
	g, b := grid1(rows * e)
	return k.launch(s, "topk_idx", what, g, b, 0, driver.P(out), driver.P(x), driver.I(rows), driver.I(e), driver.I(kk))
}

// GatherRows is the gather op: out [rows, k] = x [rows, e] at idx (int64 [rows, k]).
func (k *Kernels) GatherRows(s *driver.Stream, what string, out, x driver.Ptr, rows, e int, idx driver.Ptr, kk int) error {
	g, b := grid1(rows * kk)
	return k.launch(s, "gather_rows", what, g, b, 0, driver.P(out), driver.P(x), driver.I(rows), driver.I(e), driver.P(idx), driver.I(kk))
}

// moeMaxTopk is the largest k moe_combine takes.
const moeMaxTopk = 32

// MoECombine is the moe_combine op: out [rows, dim] (fp32) = Σ of y [rows,
// k, dim] over each token's experts in ascending id (idx int64 [rows, k]).
func (k *Kernels) MoECombine(s *driver.Stream, what string, out, y, idx driver.Ptr, rows, kk, dim int) error {
	if kk > moeMaxTopk {
		return fmt.Errorf("cuda moe_combine for %s: top-%d (at most %d)", what, kk, moeMaxTopk)
	}
	g, b := grid1(rows * dim)
	return k.launch(s, "moe_combine", what, g, b, 0, driver.P(out), driver.P(y), driver.P(idx), driver.I(rows), driver.I(kk), driver.I(dim))
}

// TokenMap is the token_map op: out[i] = m[ids[i]] (int64); an id out of
// range sets *bad (int32, zeroed by the caller) to the largest bad i + 1.
func (k *Kernels) TokenMap(s *driver.Stream, what string, out, m driver.Ptr, nMap int, ids driver.Ptr, n int, bad driver.Ptr) error {
	g, b := grid1(n)
	return k.launch(s, "token_map", what, g, b, 0, driver.P(out), driver.P(m), driver.L(nMap), driver.P(ids), driver.I(n), driver.P(bad))
}
