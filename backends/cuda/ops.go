package cuda

import (
	"errors"
	"fmt"
	"math"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

// The launchers of the graph's ops. Each mirrors the cpu backend's kernel
// of the op (backends/cpu/ops.go): the same shapes, the same rounding to
// the output dtype, the same reference kernel behind the CUDA one (see the
// comments of kernels.go and generic.go). Host-side values a launcher uses
// are the call's sizes (B, S, M, the start position P) and the graph's
// attributes, never a value computed on the GPU.
var ops map[string]opFunc

func init() {
	ops = map[string]opFunc{
		"input": opInput, "weight": opWeight, "const": opConst, "state": opState, "rope_table": opRopeTable,
		"cast":    opCast,
		"sigmoid": unaryOp("sigmoid"), "silu": unaryOp("silu"), "rsqrt": unaryOp("rsqrt"), "sqrt": unaryOp("sqrt"),
		"exp": unaryOp("exp"), "relu": unaryOp("relu"), "softplus": unaryOp("softplus"),
		"clamp": opClamp, "add_scalar": scalarOp("add_scalar"), "mul_scalar": scalarOp("mul_scalar"),
		"add": binaryOp("add"), "sub": binaryOp("sub"), "mul": binaryOp("mul"), "div": binaryOp("div"),
		"mask_fill": opMaskFill, "act_quant": opActQuant, "fp4_quant": opFP4Quant,
		"mean_sq": opMeanSq, "sum": opSum, "softmax": opSoftmax,
		"reshape": opReshape, "slice": opSlice, "last": opLast, "concat": opConcat, "expand": opExpand,
		"embed": opEmbed, "token_map": opTokenMap, "gather": opGather, "topk_idx": opTopkIdx,
		"matmul": opMatmul, "matmul_fp8": opMatmulQ, "matmul_fp4": opMatmulQ, "grouped_matmul": opGrouped,
		"expert_matmul": opExpertMatmul, "moe_combine": opMoECombine,
		"rmsnorm": opRMSNorm, "hc_pre": opHCPre, "hc_post": opHCPost, "hc_mix": opHCMix, "hc_split_sinkhorn": opSinkhorn,
		"positions": opPositions, "rope": opRope, "window_idx": opWindowIdx, "window_update": opWindowUpdate,
		"sparse_attn": opSparseAttn, "group_state_update": opGroupState, "compressor_pool": opCompressorPool,
		"cache_write": opCacheWrite, "cache_read": opCacheRead,
		"index_score": opIndexScore, "index_mask": opIndexMask, "candidate_blocks": opCandidates, "index_topk": opIndexTopk,
		"engram_hist_update": opEngramHist, "engram_hash": opEngramHash, "engram_lookup": opEngramLookup, "engram_gate": opEngramGate,
		"probe":        opProbe,
		"swiglu_clamp": opSwiGLU,
	}
}

// floatOnly are the ops whose operands and result are all floats.
var floatOnly = map[string]bool{
	"sigmoid": true, "silu": true, "rsqrt": true, "sqrt": true, "exp": true, "relu": true, "softplus": true,
	"clamp": true, "add_scalar": true, "mul_scalar": true, "add": true, "sub": true, "mul": true, "div": true,
	"mean_sq": true, "sum": true, "softmax": true, "act_quant": true, "fp4_quant": true,
}

// supportsNode is the per-node part of Supports.
func supportsNode(n *ir.Node) bool {
	if floatOnly[n.Op] {
		if !n.Type.DType.IsFloat() {
			return false
		}
		for _, a := range n.Args {
			if !a.Type.DType.IsFloat() {
				return false
			}
		}
	}
	switch n.Op {
	case "slice", "last", "concat", "expand": // the strided copy moves 4- or 8-byte elements
		return elemBytes(n.Type.DType) >= 4
	case "embed":
		w := n.Args[0]
		return w.Op == "weight" && w.Attrs.Str("format", "") == "bf16"
	case "mean_sq", "softmax":
		ax := int(n.Attrs.Int("axis", -1))
		return ax == -1 || ax == len(n.Args[0].Type.Shape)-1
	}
	return true
}

func clone(s []int) []int { return append([]int(nil), s...) }

// roundTo reports whether results of dtype dt are rounded to bf16.
func roundTo(dt ir.DType) bool { return dt == ir.BF16 }

// named is the buffer of m named by n's "name" attribute; missing says
// what is absent ("input %q not given").
func named(m map[string]backends.Buffer, n *ir.Node, missing string) (*Value, error) {
	name := n.Attrs.Str("name", "")
	b, ok := m[name]
	if !ok {
		return nil, fmt.Errorf(missing, name)
	}
	return asValue(b, n)
}

// bound is the buffer the environment's function f gives for n; none says
// that f is absent.
func bound(f func(*ir.Node) (backends.Buffer, error), n *ir.Node, none string) (*Value, error) {
	if f == nil {
		return nil, errors.New(none)
	}
	b, err := f(n)
	if err != nil {
		return nil, err
	}
	return asValue(b, n)
}

func opInput(c *call, _ int, n *ir.Node, _ []*Value) (*Value, error) {
	return named(c.env.Inputs, n, "input %q not given")
}

func opWeight(c *call, _ int, n *ir.Node, _ []*Value) (*Value, error) {
	return bound(c.env.Weight, n, "no weights bound")
}

func opConst(c *call, i int, _ *ir.Node, _ []*Value) (*Value, error) { return c.p.consts[i], nil }

func opState(c *call, _ int, n *ir.Node, _ []*Value) (*Value, error) {
	return named(c.env.State, n, "state %q not allocated")
}

func opRopeTable(c *call, _ int, n *ir.Node, _ []*Value) (*Value, error) {
	return bound(c.env.Rope, n, "no RoPE tables")
}

// values returns the fp32 values of a float value: an activation's buffer,
// or a weight's fp32 copy (made at the first use of a weight stored for
// the products, from the mapped checkpoint bytes).
func (c *call) values(v *Value) (driver.Ptr, error) {
	if v.W == nil || v.W.Kind == LayoutF32 {
		return v.Ptr, nil
	}
	if v.W.widened != 0 {
		return v.W.widened, nil
	}
	if v.W.src == nil || (v.W.Kind != LayoutBF16 && v.W.Kind != LayoutStoredFP8) {
		return 0, fmt.Errorf("weight of layout %d read as values", v.W.Kind)
	}
	hw, err := layoutOf(v.W.src, "values")
	if err != nil {
		return 0, err
	}
	p, err := c.gpu.alloc(int64(len(hw.data)), v.W.src.Name+" as fp32")
	if err != nil {
		return 0, err
	}
	v.W.widened = p
	v.W.Bytes += int64(len(hw.data))
	return p, c.st.Upload(p, hw.data, v.W.src.Name+" as fp32")
}

// valuesOut returns v's fp32 values (c.values) and node i's output, of
// dtype dt and the given shape, for the ops that read one float value.
func (c *call) valuesOut(i int, v *Value, dt ir.DType, shape []int) (driver.Ptr, *Value, error) {
	x, err := c.values(v)
	if err != nil {
		return 0, nil, err
	}
	out, err := c.out(i, dt, shape)
	return x, out, err
}

// plain is a weight as the plain products read it.
func plain(v *Value) (Plain, error) {
	if v.W == nil {
		return Plain{W: v.Ptr, Format: PlainF32}, nil // an activation used as a matrix
	}
	switch v.W.Kind {
	case LayoutF32:
		return Plain{W: v.Ptr, Format: PlainF32}, nil
	case LayoutBF16:
		return Plain{W: v.Ptr, Format: PlainBF16}, nil
	case LayoutStoredFP8:
		return Plain{W: v.Ptr, Scale: v.W.Scale, Format: PlainFP8}, nil
	}
	return Plain{}, fmt.Errorf("weight of layout %d is not a plain matrix", v.W.Kind)
}

func opCast(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	to, _ := ir.ParseDType(n.Attrs.Str("to", ""))
	x, out, err := c.valuesOut(i, a[0], to, clone(a[0].Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.Unary(c.st, what(n), out.Ptr, x, out.Numel(), "cast", 0, 0, roundTo(to))
}

func unaryWith(c *call, i int, n *ir.Node, a []*Value, op string, p0, p1 float32) (*Value, error) {
	x, out, err := c.valuesOut(i, a[0], a[0].DType, clone(a[0].Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.Unary(c.st, what(n), out.Ptr, x, out.Numel(), op, p0, p1, roundTo(a[0].DType))
}

func unaryOp(op string) opFunc {
	return func(c *call, i int, n *ir.Node, a []*Value) (*Value, error) { return unaryWith(c, i, n, a, op, 0, 0) }
}

func scalarOp(op string) opFunc {
	return func(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
		return unaryWith(c, i, n, a, op, float32(n.Attrs.Float("value", 0)), 0)
	}
}

func opClamp(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	if _, ok := n.Attrs["lo"]; ok {
		lo = float32(n.Attrs.Float("lo", 0))
	}
	if _, ok := n.Attrs["hi"]; ok {
		hi = float32(n.Attrs.Float("hi", 0))
	}
	return unaryWith(c, i, n, a, "clamp", lo, hi)
}

func binaryOp(op string) opFunc {
	return func(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
		x, err := c.values(a[0])
		if err != nil {
			return nil, err
		}
		y, err := c.values(a[1])
		if err != nil {
			return nil, err
		}
		shape, _, _, err := broadcastStrides(a[0].Shape, a[1].Shape)
		if err != nil {
			return nil, err
		}
		out, err := c.out(i, a[0].DType, shape)
		if err != nil {
			return nil, err
		}
		_, err = c.k.Binary(c.st, what(n), out.Ptr, x, a[0].Shape, y, a[1].Shape, op, roundTo(a[0].DType))
		return out, err
	}
}

func opMaskFill(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	out, err := c.out(i, a[0].DType, clone(a[0].Shape))
	if err != nil {
		return nil, err
	}
	if err := c.copyFlat(n, a[0].DType, out.Ptr, a[0].Ptr, a[0].Numel()); err != nil {
		return nil, err
	}
	return out, c.k.ApplyCandidates(c.st, what(n), out.Ptr, a[1].Ptr, out.Numel())
}

func opActQuant(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	out, err := c.out(i, ir.BF16, clone(a[0].Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.ActQuant(c.st, what(n), out.Ptr, a[0].Ptr, 0, 0, out.Numel(), int(n.Attrs.Int("block", 32)))
}

func opFP4Quant(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	out, err := c.out(i, ir.BF16, clone(a[0].Shape))
	if err != nil {
		return nil, err
	}
	e4 := n.Attrs.Str("scale", "e8m0") == "e4m3"
	return out, c.k.FP4ActQuant(c.st, what(n), out.Ptr, a[0].Ptr, 0, 0, out.Numel(), int(n.Attrs.Int("block", 32)), e4)
}

// reduced is the shape of a reduction over n's axis of s, and the axis.
func reduced(n *ir.Node, s []int) ([]int, int) {
	ax := axisOf(n, len(s))
	out := clone(s)
	if n.Attrs.Bool("keepdim", true) {
		out[ax] = 1
	} else {
		out = append(out[:ax], out[ax+1:]...)
	}
	return out, ax
}

func axisOf(n *ir.Node, rank int) int {
	ax := int(n.Attrs.Int("axis", -1))
	if ax < 0 {
		ax += rank
	}
	return ax
}

func opMeanSq(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	shape, _ := reduced(n, a[0].Shape)
	x, out, err := c.valuesOut(i, a[0], a[0].DType, shape)
	if err != nil {
		return nil, err
	}
	return out, c.k.MeanSq(c.st, what(n), out.Ptr, x, rows(a[0]), last(a[0]), roundTo(a[0].DType))
}

func opSum(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	shape, ax := reduced(n, a[0].Shape)
	x, out, err := c.valuesOut(i, a[0], a[0].DType, shape)
	if err != nil {
		return nil, err
	}
	return out, c.k.Sum(c.st, what(n), out.Ptr, x, a[0].Shape, ax, roundTo(a[0].DType))
}

func opSoftmax(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, out, err := c.valuesOut(i, a[0], a[0].DType, clone(a[0].Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.Softmax(c.st, what(n), out.Ptr, x, rows(a[0]), last(a[0]), roundTo(a[0].DType))
}

func opReshape(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	dims, err := c.bindings().Dims(c.p.shapes[i])
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(dims))
	for k, d := range dims {
		shape[k] = int(d)
	}
	if numel(shape) != a[0].Numel() {
		return nil, fmt.Errorf("reshape of %d elements to %v", a[0].Numel(), shape)
	}
	v := *a[0]
	v.Shape = shape
	return &v, nil
}

// copyStrided is a strided copy of elements of dt.
func (c *call) copyStrided(n *ir.Node, dt ir.DType, out, in driver.Ptr, dims, inStrides, outStrides []int) error {
	return c.k.CopyStrided(c.st, what(n), out, in, int(elemBytes(dt)), dims, inStrides, outStrides)
}

// copyFlat copies elems elements of dt: by the strided-copy kernel where
// the elements are 4 or 8 bytes (a kernel node, whose size a captured
// graph updates in place as a cache grows), else by a device copy.
func (c *call) copyFlat(n *ir.Node, dt ir.DType, out, in driver.Ptr, elems int) error {
	if e := elemBytes(dt); e != 4 && e != 8 {
		return c.st.Copy(out, in, int(int64(elems)*e), what(n))
	}
	return c.copyStrided(n, dt, out, in, []int{elems}, []int{1}, []int{1})
}

func offset(p driver.Ptr, elems int, dt ir.DType) driver.Ptr {
	return p + driver.Ptr(int64(elems)*elemBytes(dt))
}

func opSlice(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x := a[0]
	ax := axisOf(n, len(x.Shape))
	st, en := int(n.Attrs.Int("start", 0)), int(n.Attrs.Int("end", 0))
	if st < 0 || en > x.Shape[ax] || st > en {
		return nil, fmt.Errorf("slice %d..%d of dim %d", st, en, x.Shape[ax])
	}
	return c.sliceAxis(i, n, x, ax, st, en)
}

// sliceAxis copies elements st..en-1 along axis ax of x into node i's output.
func (c *call) sliceAxis(i int, n *ir.Node, x *Value, ax, st, en int) (*Value, error) {
	shape := clone(x.Shape)
	shape[ax] = en - st
	out, err := c.out(i, x.DType, shape)
	if err != nil {
		return nil, err
	}
	in := contiguous(x.Shape)
	return out, c.copyStrided(n, x.DType, out.Ptr, offset(x.Ptr, st*in[ax], x.DType), shape, in, contiguous(shape))
}

func opLast(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x := a[0]
	ax := axisOf(n, len(x.Shape))
	d := x.Shape[ax]
	if d < 1 {
		return nil, fmt.Errorf("last of an empty axis %d", ax)
	}
	return c.sliceAxis(i, n, x, ax, d-1, d)
}

func opConcat(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	ax := axisOf(n, len(a[0].Shape))
	shape := clone(a[0].Shape)
	shape[ax] = 0
	for _, t := range a {
		shape[ax] += t.Shape[ax]
	}
	out, err := c.out(i, a[0].DType, shape)
	if err != nil {
		return nil, err
	}
	os := contiguous(shape)
	at := 0
	for _, t := range a {
		if err := c.copyStrided(n, t.DType, offset(out.Ptr, at*os[ax], t.DType), t.Ptr, t.Shape, contiguous(t.Shape), os); err != nil {
			return nil, err
		}
		at += t.Shape[ax]
	}
	return out, nil
}

func opExpand(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x := a[0]
	ax, k := int(n.Attrs.Int("axis", 0)), int(n.Attrs.Int("n", 1))
	if ax < 0 || ax > len(x.Shape) {
		return nil, fmt.Errorf("expand axis %d of rank %d", ax, len(x.Shape))
	}
	shape := append(clone(x.Shape[:ax]), append([]int{k}, x.Shape[ax:]...)...)
	xs := contiguous(x.Shape)
	in := append(clone(xs[:ax]), append([]int{0}, xs[ax:]...)...)
	out, err := c.out(i, x.DType, shape)
	if err != nil {
		return nil, err
	}
	return out, c.copyStrided(n, x.DType, out.Ptr, x.Ptr, shape, in, contiguous(shape))
}

// flagPtr is node i's error flag.
func (c *call) flagPtr(i int) driver.Ptr { return c.p.flags + driver.Ptr(4*c.p.flag[i]) }

func opEmbed(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	tab, ids := a[0], a[1]
	if tab.W == nil || tab.W.Kind != LayoutBF16 {
		return nil, fmt.Errorf("the embedding table is not a bf16 matrix")
	}
	V, D := tab.Shape[0], tab.Shape[1]
	out, err := c.out(i, tab.DType, append(clone(ids.Shape), D))
	if err != nil {
		return nil, err
	}
	return out, c.k.EmbedBF16(c.st, what(n), out.Ptr, tab.Ptr, V, D, ids.Ptr, ids.Numel(), c.flagPtr(i))
}

func opTokenMap(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	m, ids := a[0], a[1]
	out, err := c.out(i, ir.I64, clone(ids.Shape))
	if err != nil {
		return nil, err
	}
	if m.Host != nil && ids.Host != nil { // a constant id (the pad): known on the host too
		out.Host = make([]int64, len(ids.Host))
		for k, id := range ids.Host {
			if id < 0 || int(id) >= len(m.Host) {
				return nil, fmt.Errorf("token id %d out of range of the Engram token map [0,%d)", id, len(m.Host))
			}
			out.Host[k] = m.Host[id]
		}
	}
	return out, c.k.TokenMap(c.st, what(n), out.Ptr, m.Ptr, m.Numel(), ids.Ptr, ids.Numel(), c.flagPtr(i))
}

func opGather(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, idx := a[0], a[1]
	xv, err := c.values(x)
	if err != nil {
		return nil, err
	}
	out, err := c.out(i, x.DType, clone(idx.Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.GatherRows(c.st, what(n), out.Ptr, xv, idx.Shape[0], x.Shape[1], idx.Ptr, idx.Shape[1])
}

func opTopkIdx(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x := a[0]
	k := int(n.Attrs.Int("k", 1))
	xv, err := c.values(x)
	if err != nil {
		return nil, err
	}
	out, err := c.out(i, ir.I64, []int{x.Shape[0], k})
	if err != nil {
		return nil, err
	}
	return out, c.k.TopkIdx(c.st, what(n), out.Ptr, xv, x.Shape[0], x.Shape[1], k)
}

func opMatmul(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, w := a[0], a[1]
	N, K := w.Shape[0], w.Shape[1]
	pw, err := plain(w)
	if err != nil {
		return nil, err
	}
	shape := clone(x.Shape)
	shape[len(shape)-1] = N
	out, err := c.out(i, x.DType, shape)
	if err != nil {
		return nil, err
	}
	return out, c.k.MatmulF32(c.st, what(n), out.Ptr, x.Ptr, rows(x), K, pw, N, x.DType != ir.F32)
}

func opMatmulQ(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, w := a[0], a[1]
	if w.W == nil || w.W.Kind != LayoutQuant {
		return nil, fmt.Errorf("the weight is not a block-scaled matrix")
	}
	N, K := w.Shape[0], w.Shape[1]
	shape := clone(x.Shape)
	shape[len(shape)-1] = N
	out, err := c.out(i, ir.BF16, shape)
	if err != nil {
		return nil, err
	}
	fp4 := w.DType == ir.FP4E2M1
	if m := rows(x); !c.k.Exact && fakeQuantised(n.Args[0]) && tcEligible(m, K, N) {
		// prefill on tensor cores: the input is act_quant's (block 32), so
		// its codes are recovered exactly (TCQuantA)
		scratch, err := c.scratch(i, 0, int64(TCScratchBytes(m, K)))
		if err != nil {
			return nil, err
		}
		if fp4 {
			return out, c.k.MatmulFP4TC(c.st, what(n), out.Ptr, x.Ptr, m, K, w.Ptr, w.W.Scale, N, scratch)
		}
		return out, c.k.MatmulFP8TC(c.st, what(n), out.Ptr, x.Ptr, m, K, w.Ptr, w.W.Scale, N, scratch)
	}
	if fp4 {
		return out, c.k.MatmulFP4(c.st, what(n), out.Ptr, x.Ptr, rows(x), K, w.Ptr, w.W.Scale, N)
	}
	return out, c.k.MatmulFP8(c.st, what(n), out.Ptr, x.Ptr, rows(x), K, w.Ptr, w.W.Scale, N)
}

// fakeQuantised reports whether x is act_quant's output with 32-wide blocks,
// the only activations whose e4m3 codes TCQuantA recovers exactly.
func fakeQuantised(x *ir.Node) bool {
	return x != nil && x.Op == "act_quant" && x.Attrs["block"] == int64(32)
}

func opGrouped(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, w := a[0], a[1]
	G := int(n.Attrs.Int("groups", 1))
	pw, err := plain(w)
	if err != nil {
		return nil, err
	}
	shape := clone(x.Shape)
	shape[len(shape)-1] = w.Shape[0]
	out, err := c.out(i, ir.BF16, shape)
	if err != nil {
		return nil, err
	}
	return out, c.k.GroupedLoRA(c.st, what(n), out.Ptr, x.Ptr, rows(x), G, w.Shape[1], pw, w.Shape[0]/G, x.DType == ir.BF16)
}

func opExpertMatmul(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, w, idx := a[0], a[1], a[2]
	if w.W == nil || w.W.Routed == nil {
		return nil, fmt.Errorf("the weight is not an expert stack")
	}
	N, k := idx.Shape[0], idx.Shape[1]
	O, K := w.Shape[1], w.Shape[2]
	adiv := k // one token's input for its k experts
	if len(x.Shape) == 3 {
		adiv = 1 // an input per (token, expert)
	}
	out, err := c.out(i, ir.BF16, []int{N, k, O})
	if err != nil {
		return nil, err
	}
	if c.k.routedTC(fakeQuantised(n.Args[0]), N*k, adiv, K, O) {
		rg, codes, scales, err := c.routeInputs(i, x, idx, N*k, adiv, K, w.W.Routed.Experts)
		if err != nil {
			return nil, err
		}
		return out, c.k.MatmulRoutedTC(c.st, what(n), out.Ptr, codes, scales, adiv, K, *w.W.Routed, O, rg, N*k)
	}
	return out, c.k.MatmulRouted(c.st, what(n), out.Ptr, x.Ptr, adiv, K, *w.W.Routed, O, idx.Ptr, N*k)
}

// routeInputs prepares node i's grouped prefill products: the routing rows
// grouped by expert (RouteGroups, in the node's scratch 0) and the codes
// and scales of the input x (rows/adiv rows of kdim; TCQuantA, scratch 1).
func (c *call) routeInputs(i int, x, idx *Value, rows, adiv, kdim, experts int) (rg routeGroups, codes, scales driver.Ptr, err error) {
	rs, err := c.scratch(i, 0, int64(routeScratchBytes(rows, experts)))
	if err != nil {
		return rg, 0, 0, err
	}
	qs, err := c.scratch(i, 1, int64(TCScratchBytes(rows/adiv, kdim)))
	if err != nil {
		return rg, 0, 0, err
	}
	w := what(c.p.seg.Nodes[i])
	if rg, err = c.k.RouteGroups(c.st, w, idx.Ptr, rows, experts, rs); err != nil {
		return rg, 0, 0, err
	}
	codes, scales = qs, qs+driver.Ptr(rows/adiv*kdim)
	return rg, codes, scales, c.k.TCQuantA(c.st, w, codes, scales, x.Ptr, rows/adiv, kdim)
}

func opMoECombine(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	y, idx := a[0], a[1]
	N, k, D := y.Shape[0], y.Shape[1], y.Shape[2]
	out, err := c.out(i, ir.F32, []int{N, D})
	if err != nil {
		return nil, err
	}
	return out, c.k.MoECombine(c.st, what(n), out.Ptr, y.Ptr, idx.Ptr, N, k, D)
}

func opRMSNorm(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x := a[0]
	w, err := c.values(a[1])
	if err != nil {
		return nil, err
	}
	out, err := c.out(i, x.DType, clone(x.Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.RMSNorm(c.st, what(n), out.Ptr, x.Ptr, w, rows(x), last(x), float32(n.Attrs.Float("eps", 0)))
}

// hcDims are the token count, hc and dim of a residual stream [..., hc, dim].
func hcDims(h *Value) (tokens, hc, dim int) {
	s := h.Shape
	hc, dim = s[len(s)-2], s[len(s)-1]
	return h.Numel() / max(hc*dim, 1), hc, dim
}

func opHCPre(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	h, pre := a[0], a[1]
	tokens, hc, D := hcDims(h)
	pp, err := c.values(pre)
	if err != nil {
		return nil, err
	}
	if pre.Numel() != tokens*hc { // one mix for every token (a constant [hc])
		if pre.Numel() < hc {
			return nil, fmt.Errorf("pre mix of %d values for hc %d", pre.Numel(), hc)
		}
		b, err := c.scratch(i, 0, int64(tokens*hc*4))
		if err != nil {
			return nil, err
		}
		if err := c.copyStrided(n, ir.F32, b, offset(pp, pre.Numel()-hc, ir.F32), []int{tokens, hc}, []int{0, 1}, []int{hc, 1}); err != nil {
			return nil, err
		}
		pp = b
	}
	out, err := c.out(i, ir.BF16, append(clone(h.Shape[:len(h.Shape)-2]), D))
	if err != nil {
		return nil, err
	}
	return out, c.k.HCPre(c.st, what(n), out.Ptr, h.Ptr, pp, tokens, hc, D)
}

func opHCPost(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	y, res, post, comb := a[0], a[1], a[2], a[3]
	tokens, hc, D := hcDims(res)
	out, err := c.out(i, ir.BF16, clone(res.Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.HCPost(c.st, what(n), out.Ptr, y.Ptr, res.Ptr, post.Ptr, comb.Ptr, tokens, hc, D)
}

func opHCMix(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	h, fn := a[0], a[1]
	tokens, hc, D := hcDims(h)
	fp, err := c.values(fn)
	if err != nil {
		return nil, err
	}
	out, err := c.out(i, ir.F32, append(clone(h.Shape[:len(h.Shape)-2]), fn.Shape[0]))
	if err != nil {
		return nil, err
	}
	if fn.Shape[0] != (2+hc)*hc || fn.Shape[1] != hc*D {
		return nil, fmt.Errorf("hc fn %v for hc %d, dim %d", fn.Shape, hc, D)
	}
	return out, c.k.HCMixes(c.st, what(n), out.Ptr, h.Ptr, tokens, hc, D, fp, float32(n.Attrs.Float("eps", 0)))
}

// opSinkhorn runs hc_split_sinkhorn into three scratch buffers and
// interleaves them per token as the graph's [.., pre | post | comb].
func opSinkhorn(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	m := a[0]
	hc := int(n.Attrs.Int("hc", 4))
	mix := (2 + hc) * hc
	tokens := m.Numel() / mix
	scale, err := c.values(a[1])
	if err != nil {
		return nil, err
	}
	base, err := c.values(a[2])
	if err != nil {
		return nil, err
	}
	var parts [3]driver.Ptr
	widths := [3]int{hc, hc, hc * hc}
	for k := range parts {
		if parts[k], err = c.scratch(i, k, int64(tokens*widths[k]*4)); err != nil {
			return nil, err
		}
	}
	if err := c.k.HCSplitSinkhorn(c.st, what(n), parts[0], parts[1], parts[2], m.Ptr, tokens, hc, scale, base,
		int(n.Attrs.Int("iters", 20)), float32(n.Attrs.Float("eps", 0))); err != nil {
		return nil, err
	}
	out, err := c.out(i, ir.F32, clone(m.Shape))
	if err != nil {
		return nil, err
	}
	at := 0
	for k, p := range parts {
		if err := c.copyStrided(n, ir.F32, offset(out.Ptr, at, ir.F32), p, []int{tokens, widths[k]}, []int{widths[k], 1}, []int{mix, 1}); err != nil {
			return nil, err
		}
		at += widths[k]
	}
	return out, nil
}

func opPositions(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	S, P := a[0].Shape[1], c.P
	ratio := int(n.Attrs.Int("ratio", 1))
	var pos []int64
	if ratio == 1 {
		for t := range S {
			pos = append(pos, int64(P+t))
		}
	} else {
		for g := P / ratio; g < (P+S)/ratio; g++ {
			pos = append(pos, int64(g*ratio))
		}
	}
	out, err := c.out(i, ir.I64, []int{len(pos)})
	if err != nil {
		return nil, err
	}
	return out, Upload(c.st, out.Ptr, pos, what(n))
}

func opRope(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	x, tab, pos := a[0], a[1], a[2]
	out, err := c.out(i, x.DType, clone(x.Shape))
	if err != nil {
		return nil, err
	}
	if x.Numel() == 0 {
		return out, nil
	}
	W, T := last(x), x.Shape[1]
	perT := x.Numel() / (x.Shape[0] * T * W) // rows per (b, t)
	nrows := rows(x)
	dim := int(n.Attrs.Int("dim", 0))
	if (W-dim)%2 == 0 && dim%2 == 0 && dim <= W { // one launch: no positions' broadcast, no copy of x
		return out, c.k.RopeRows(c.st, what(n), out.Ptr, x.Ptr, nrows, W, dim, tab.Ptr, tab.Shape[0], pos.Ptr, perT, T, n.Attrs.Bool("inverse", false))
	}
	ps, err := c.scratch(i, 0, int64(nrows*8))
	if err != nil {
		return nil, err
	}
	// the position of row r is pos[(r / perT) mod T]
	if err := c.copyStrided(n, ir.I64, ps, pos.Ptr, []int{x.Shape[0], T, perT}, []int{0, 1, 0}, contiguous([]int{x.Shape[0], T, perT})); err != nil {
		return nil, err
	}
	if err := c.st.Copy(out.Ptr, x.Ptr, int(x.Bytes()), what(n)); err != nil {
		return nil, err
	}
	return out, c.k.Rotary(c.st, what(n), out.Ptr, nrows, W, int(n.Attrs.Int("dim", 0)), tab.Ptr, tab.Shape[0], ps, n.Attrs.Bool("inverse", false))
}

func opWindowIdx(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	B, S, P := a[0].Shape[0], a[0].Shape[1], c.P
	W := int(n.Attrs.Int("window", 0))
	var one []int32
	var T int
	if n.Attrs.Str("phase", "") == "decode" {
		one, T = kernels.WindowIdxDecode(P, W), W
	} else {
		one, T = kernels.WindowIdxPrefill(S, W), min(S, W)
	}
	all := make([]int32, 0, B*len(one))
	for range B {
		all = append(all, one...)
	}
	out, err := c.out(i, ir.I32, []int{B, S, T})
	if err != nil {
		return nil, err
	}
	return out, Upload(c.st, out.Ptr, all, what(n))
}

// copyRows copies rows [r0, r0+cnt) of src [B, srcRows, D] to rows
// [d0, d0+cnt) of dst [B, dstRows, D].
func (c *call) copyRows(n *ir.Node, dt ir.DType, dst driver.Ptr, dstRows, d0 int, src driver.Ptr, srcRows, r0, cnt, B, D int) error {
	if cnt <= 0 {
		return nil
	}
	return c.copyStrided(n, dt, offset(dst, d0*D, dt), offset(src, r0*D, dt), []int{B, cnt, D}, []int{srcRows * D, D, 1}, []int{dstRows * D, D, 1})
}

func opWindowUpdate(c *call, _ int, n *ir.Node, a []*Value) (*Value, error) {
	ring, kv := a[0], a[1]
	B, W, D := ring.Shape[0], ring.Shape[1], ring.Shape[2]
	S := kv.Shape[1]
	if c.P != 0 {
		return ring, c.copyRows(n, ring.DType, ring.Ptr, W, c.P%W, kv.Ptr, S, 0, 1, B, D)
	}
	// token t goes to slot t mod W, for the last min(S, W) tokens: at most
	// two runs of consecutive slots
	for t := max(0, S-W); t < S; {
		slot := t % W
		run := min(S-t, W-slot)
		if err := c.copyRows(n, ring.DType, ring.Ptr, W, slot, kv.Ptr, S, t, run, B, D); err != nil {
			return nil, err
		}
		t += run
	}
	return ring, nil
}

func opSparseAttn(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	q, kv, sink, idx := a[0], a[1], a[2], a[3]
	B, M, H, D := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	sp, err := c.values(sink)
	if err != nil {
		return nil, err
	}
	out, err := c.out(i, ir.BF16, clone(q.Shape))
	if err != nil {
		return nil, err
	}
	var kv2 driver.Ptr
	N2 := 0
	if len(a) == 5 {
		kv2, N2 = a[4].Ptr, a[4].Shape[1]
	}
	T := idx.Shape[2]
	var scratch driver.Ptr
	if bytes := SparseAttnScratch(B, M, H, D, T); bytes > 0 { // the decode form
		if scratch, err = c.scratch(i, 0, bytes); err != nil {
			return nil, err
		}
	}
	return out, c.k.SparseAttn(c.st, what(n), out.Ptr, q.Ptr, B, M, H, D, kv.Ptr, kv.Shape[1], kv2, N2, sp, idx.Ptr, T, float32(n.Attrs.Float("scale", 1)), scratch)
}

func opGroupState(c *call, _ int, n *ir.Node, a []*Value) (*Value, error) {
	st, x := a[0], a[1]
	B, R, D := st.Shape[0], st.Shape[1], st.Shape[2]
	S := x.Shape[1]
	if c.P != 0 {
		return st, c.copyRows(n, st.DType, st.Ptr, R, c.P%R, x.Ptr, S, 0, 1, B, D)
	}
	// the incomplete tail group goes to slots 0.. of the state
	return st, c.copyRows(n, st.DType, st.Ptr, R, 0, x.Ptr, S, S-S%R, S%R, B, D)
}

func opCompressorPool(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	cv, z, kvst, scst := a[0], a[1], a[2], a[3]
	R := int(n.Attrs.Int("ratio", 2))
	B, S, D := cv.Shape[0], cv.Shape[1], cv.Shape[2]
	G := (c.P+S)/R - c.P/R
	out, err := c.out(i, ir.F32, []int{B, G, D})
	if err != nil {
		return nil, err
	}
	_, err = c.k.CompressorPool(c.st, what(n), out.Ptr, cv.Ptr, z.Ptr, B, S, D, R, kvst.Ptr, scst.Ptr, c.P)
	return out, err
}

func opCacheWrite(c *call, _ int, n *ir.Node, a []*Value) (*Value, error) {
	cache, rowsV := a[0], a[1]
	B, Mr, D := cache.Shape[0], cache.Shape[1], cache.Shape[2]
	G := rowsV.Shape[1]
	at := c.P / int(n.Attrs.Int("ratio", 1))
	if at+G > Mr {
		return nil, fmt.Errorf("cache of %d rows cannot take rows %d..%d (maximum length too small)", Mr, at, at+G)
	}
	return cache, c.copyRows(n, cache.DType, cache.Ptr, Mr, at, rowsV.Ptr, G, 0, G, B, D)
}

func opCacheRead(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	cache := a[0]
	B, Mr, D := cache.Shape[0], cache.Shape[1], cache.Shape[2]
	nc := (c.P + a[1].Shape[1]) / int(n.Attrs.Int("ratio", 1))
	if nc > Mr {
		return nil, fmt.Errorf("cache of %d rows read to %d", Mr, nc)
	}
	out, err := c.out(i, cache.DType, []int{B, nc, D})
	if err != nil {
		return nil, err
	}
	return out, c.copyRows(n, cache.DType, out.Ptr, nc, 0, cache.Ptr, Mr, 0, nc, B, D)
}

func opIndexScore(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	q, k, w := a[0], a[1], a[2]
	B, S, H, Di := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	nc := k.Shape[1]
	out, err := c.out(i, ir.BF16, []int{B, S, nc})
	if err != nil {
		return nil, err
	}
	return out, c.k.IndexScore(c.st, what(n), out.Ptr, q.Ptr, B, S, H, Di, k.Ptr, nc, w.Ptr)
}

func opIndexMask(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	s := a[0]
	out, err := c.out(i, s.DType, clone(s.Shape))
	if err != nil {
		return nil, err
	}
	if err := c.copyFlat(n, s.DType, out.Ptr, s.Ptr, s.Numel()); err != nil {
		return nil, err
	}
	return out, c.k.IndexCausalMask(c.st, what(n), out.Ptr, s.Shape[0], s.Shape[1], s.Shape[2], c.P, int(n.Attrs.Int("ratio", 1)))
}

// visibleLens uploads kernels.IndexVisibleLens of the call as int32.
func (c *call) visibleLens(i int, n *ir.Node, S int) (driver.Ptr, int, error) {
	lens := kernels.IndexVisibleLens(S, c.P, int(n.Attrs.Int("ratio", 1)))
	l32 := make([]int32, len(lens))
	for k, v := range lens {
		l32[k] = int32(v)
	}
	p, err := uploadScratch(c, i, 0, l32)
	return p, len(l32), err
}

func opCandidates(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	s := a[0]
	B, S, nc := s.Shape[0], s.Shape[1], s.Shape[2]
	out, err := c.out(i, ir.U8, clone(s.Shape))
	if err != nil {
		return nil, err
	}
	if err := c.st.Memset(out.Ptr, 0, out.Numel(), what(n)); err != nil || nc == 0 {
		return out, err
	}
	lens, nl, err := c.visibleLens(i, n, S)
	if err != nil {
		return nil, err
	}
	return out, c.k.SelectCandidateBlocks(c.st, what(n), out.Ptr, s.Ptr, B*S, nc, lens, nl, int(n.Attrs.Int("topk_blocks", 1)), int(n.Attrs.Int("block", 1)))
}

func opIndexTopk(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	s := a[0]
	B, S, nc := s.Shape[0], s.Shape[1], s.Shape[2]
	k := min(int(n.Attrs.Int("k", 1)), nc)
	out, err := c.out(i, ir.I32, []int{B, S, k})
	if err != nil || k == 0 {
		return out, err
	}
	lens, nl, err := c.visibleLens(i, n, S)
	if err != nil {
		return nil, err
	}
	return out, c.k.IndexTopK(c.st, what(n), out.Ptr, s.Ptr, B*S, nc, k, lens, nl, a[2].Shape[1])
}

func opEngramHist(c *call, _ int, n *ir.Node, a []*Value) (*Value, error) {
	h, ids := a[0], a[1]
	B, M := h.Shape[0], h.Shape[1]
	S := ids.Shape[1]
	if c.P+S > M {
		return nil, fmt.Errorf("positions %d..%d beyond the maximum length %d", c.P, c.P+S-1, M)
	}
	return h, c.copyStrided(n, ir.I64, offset(h.Ptr, c.P, ir.I64), ids.Ptr, []int{B, S}, []int{S, 1}, []int{M, 1})
}

func opEngramHash(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	h, tok, pad := a[0], a[1], a[3]
	B, M := h.Shape[0], h.Shape[1]
	S := tok.Shape[1]
	if len(pad.Host) != 1 {
		return nil, fmt.Errorf("the pad id is not a constant known on the host")
	}
	tb := c.p.tables[i]
	tb.Pad = pad.Host[0]
	out, err := c.out(i, ir.I64, []int{B, S, (tb.Ngram - 1) * tb.Heads})
	if err != nil {
		return nil, err
	}
	return out, c.k.EngramHash(c.st, what(n), out.Ptr, h.Ptr, B, M, S, c.P, tb)
}

func opEngramLookup(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	tab, rowsV := a[0], a[1]
	if tab.W == nil || tab.W.Kind != LayoutQuant {
		return nil, fmt.Errorf("the Engram table is not an fp8 matrix")
	}
	W := tab.Shape[1]
	out, err := c.out(i, ir.BF16, []int{rowsV.Shape[0], rowsV.Shape[1], rowsV.Shape[2] * W})
	if err != nil {
		return nil, err
	}
	return out, c.k.EngramLookup(c.st, what(n), out.Ptr, tab.Ptr, tab.W.Scale, W, tab.Shape[0], rowsV.Ptr, rowsV.Numel())
}

func opEngramGate(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	h, key, val := a[0], a[1], a[2]
	om, err := c.values(a[3])
	if err != nil {
		return nil, err
	}
	s := h.Shape
	out, err := c.out(i, ir.BF16, clone(s))
	if err != nil {
		return nil, err
	}
	return out, c.k.EngramGate(c.st, what(n), out.Ptr, h.Ptr, s[0]*s[1], s[2], s[3], key.Ptr, val.Ptr, om, float32(n.Attrs.Float("eps", 0)))
}

// opProbe is a view unless a trace asks for the value: then the callback
// reads it (Download waits for the queued work) and may hand back a
// teacher-forced replacement it uploaded (of the value's dtype; its shape
// may be wider: a per-token mix for a constant one), used as is for the
// rest of the call.
func opProbe(c *call, _ int, n *ir.Node, a []*Value) (*Value, error) {
	if c.env.Probe == nil {
		return a[0], nil
	}
	b, err := c.env.Probe(n.Attrs.Str("name", ""), n.Attrs.Bool("force", false), a[0])
	if err != nil {
		return nil, err
	}
	v, err := asValue(b, n)
	if err == nil && v.DType != a[0].DType {
		return nil, fmt.Errorf("probe %q replaced by a %s value, want %s", n.Attrs.Str("name", ""), v.DType, a[0].DType)
	}
	return v, err
}

func opSwiGLU(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	g, u := a[0], a[1]
	var w driver.Ptr
	if len(a) > 2 {
		w = a[2].Ptr
	}
	out, err := c.out(i, ir.BF16, clone(g.Shape))
	if err != nil {
		return nil, err
	}
	return out, c.k.SwiGLUClamp(c.st, what(n), out.Ptr, g.Ptr, u.Ptr, rows(g), last(g), float32(n.Attrs.Float("limit", 0)), w)
}
