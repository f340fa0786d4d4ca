package cpu

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/fast"
	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// kernelsByOp maps every op of the table to its reference kernel.
var kernelsByOp map[string]kernel

// rowPositionOps are the ops whose kernels take a ragged call's start
// positions i64[B] (rowStarts; positions of ratio 1 then gives i64[B,S],
// which rope takes as each row's own).
var rowPositionOps = []string{"positions", "rope", "window_idx", "window_update", "engram_hist_update", "engram_hash"}

// portableOps are the ops whose kernels do not look at run.fast (cpu and
// cpu-ref compute them alike) and read no weight: a ragged call may run
// them on either backend (backends.RegisterPortable), and probes, views
// there.
var portableOps = []string{"state", "probe", "window_idx", "window_update", "group_state_update", "compressor_pool", "cache_write", "cache_read",
	"index_mask", "candidate_blocks", "index_topk", "engram_hist_update", "engram_hash"}

func init() {
	backends.RegisterRowPositions("cpu", rowPositionOps...)
	backends.RegisterRowPositions("cpu-ref", rowPositionOps...)
	backends.RegisterPortable("cpu", "cpu-ref", portableOps...)
	backends.RegisterPortable("cpu-ref", "cpu", portableOps...)
	kernelsByOp = map[string]kernel{
		"input":  kInput,
		"weight": func(r *run, n *ir.Node, _ []*backends.Tensor) (*backends.Tensor, error) { return host(r.env.Weight(n)) },
		"const":  kConst,
		"state":  kState,
		"rope_table": func(r *run, n *ir.Node, _ []*backends.Tensor) (*backends.Tensor, error) {
			return host(r.env.Rope(n))
		},
		"cast":    kCast,
		"sigmoid": slice(kernels.Sigmoid),
		"silu":    slice(kernels.SiLU),
		"rsqrt":   slice(kernels.Rsqrt),
		"sqrt":    unary(func(x float32) float32 { return float32(math.Sqrt(float64(x))) }),
		"exp":     unary(func(x float32) float32 { return float32(math.Exp(float64(x))) }),
		"relu":    unary(func(x float32) float32 { return max(x, 0) }),
		"softplus": unary(func(x float32) float32 {
			if x > 20 {
				return x
			}
			return float32(math.Log1p(math.Exp(float64(x))))
		}),
		"clamp":              kClamp,
		"add_scalar":         kScalar(func(x, v float32) float32 { return x + v }),
		"mul_scalar":         kScalar(func(x, v float32) float32 { return x * v }),
		"add":                binary(func(a, b float32) float32 { return a + b }),
		"sub":                binary(func(a, b float32) float32 { return a - b }),
		"mul":                binary(func(a, b float32) float32 { return a * b }),
		"div":                binary(func(a, b float32) float32 { return a / b }),
		"mask_fill":          kMaskFill,
		"act_quant":          kActQuant,
		"fp4_quant":          kFP4Quant,
		"mean_sq":            kMeanSq,
		"sum":                kSum,
		"softmax":            kSoftmax,
		"reshape":            kReshape,
		"slice":              kSlice,
		"last":               kLast,
		"concat":             kConcat,
		"expand":             kExpand,
		"embed":              kEmbed,
		"token_map":          kTokenMap,
		"gather":             kGather,
		"topk_idx":           kTopkIdx,
		"matmul":             kMatmul,
		"matmul_fp8":         kMatmulQ,
		"matmul_fp4":         kMatmulQ,
		"grouped_matmul":     kGrouped,
		"expert_matmul":      kExpertMatmul,
		"moe_combine":        kMoECombine,
		"rmsnorm":            kRMSNorm,
		"hc_pre":             kHCPre,
		"hc_post":            kHCPost,
		"positions":          kPositions,
		"rope":               kRope,
		"window_idx":         kWindowIdx,
		"window_update":      kWindowUpdate,
		"sparse_attn":        kSparseAttn,
		"group_state_update": kGroupState,
		"compressor_pool":    kCompressorPool,
		"cache_write":        kCacheWrite,
		"cache_read":         kCacheRead,
		"index_score":        kIndexScore,
		"index_mask":         kIndexMask,
		"candidate_blocks":   kCandidates,
		"index_topk":         kIndexTopk,
		"engram_hist_update": kEngramHist,
		"engram_hash":        kEngramHash,
		"engram_lookup":      kEngramLookup,
		"engram_gate":        kEngramGate,
		"probe":              kProbe,
		"hc_mix":             kHCMix,
		"hc_split_sinkhorn":  kSinkhorn,
		"swiglu_clamp":       kSwiGLU,
	}
	// Weights kept as stored (raw bf16 matrices, the fp8 wo_a; see
	// BindWeight and backends.HostWeightTensor) reach only the ops below in
	// the DeepSeek graphs;
	// every other op gets them widened, so that any op reads F32.
	storedAware := map[string]bool{"weight": true, "embed": true, "matmul": true, "grouped_matmul": true, "reshape": true, "probe": true}
	for op, k := range kernelsByOp {
		if !storedAware[op] {
			kernelsByOp[op] = widenStored(k)
		}
	}
}

// storedBF16 reports whether t is a float matrix kept as stored in bf16:
// U8 holds its little-endian bf16 bytes (F32 may hold a widened copy).
func storedBF16(t *backends.Tensor) bool {
	return (t.DType == ir.F32 || t.DType == ir.BF16) && t.Scale == nil && len(t.U8) > 0 && len(t.U8) == 2*t.NumElements()
}

// storedFP8 reports whether t is a float matrix kept as stored in e4m3 with
// e8m0 32×32 block scales (used as bf16(e4m3·e8m0)), without an F32 copy.
func storedFP8(t *backends.Tensor) bool {
	return (t.DType == ir.F32 || t.DType == ir.BF16) && t.F32 == nil && t.Scale != nil && len(t.Shape) == 2 && len(t.U8) == t.NumElements()
}

// widened returns t with F32 values when it is kept as stored without them.
func widened(t *backends.Tensor) *backends.Tensor {
	if t == nil || t.F32 != nil || !(storedBF16(t) || storedFP8(t)) {
		return t
	}
	w := *t
	w.F32 = make([]float32, t.NumElements())
	w.U8, w.Scale = nil, nil
	if t.Scale == nil {
		fast.WidenBF16(w.F32, t.U8)
		return &w
	}
	rows, cols := t.Shape[0], t.Shape[1]
	kb := (cols + 31) / 32
	for o := range rows {
		for i := range cols {
			s := numfmt.E8M0ToF32(t.Scale[(o/32)*kb+i/32])
			w.F32[o*cols+i] = numfmt.BF16Round(numfmt.E4M3ToF32(t.U8[o*cols+i]) * s)
		}
	}
	return &w
}

// widenStored wraps a kernel that reads its arguments' F32.
func widenStored(k kernel) kernel {
	return func(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
		copied := false
		for i, t := range a {
			if w := widened(t); w != t {
				if !copied {
					a, copied = append([]*backends.Tensor(nil), a...), true
				}
				a[i] = w
			}
		}
		return k(r, n, a)
	}
}

// host is a buffer returned by an Env callback as a host tensor.
func host(b backends.Buffer, err error) (*backends.Tensor, error) {
	if err != nil {
		return nil, err
	}
	return backends.HostTensor(b)
}

// slice wraps an elementwise reference kernel over whole slices.
func slice(fn func(out, x []float32)) kernel {
	return func(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
		out := r.newF(a[0].DType, a[0].Shape...)
		fn(out.F32, a[0].F32)
		r.round(a[0].DType, out.F32)
		return out, nil
	}
}

func kInput(r *run, n *ir.Node, _ []*backends.Tensor) (*backends.Tensor, error) {
	t, ok := r.env.Inputs[n.Attrs.Str("name", "")]
	if !ok {
		return nil, fmt.Errorf("input %q not given", n.Attrs.Str("name", ""))
	}
	return backends.HostTensor(t)
}

func kConst(r *run, n *ir.Node, _ []*backends.Tensor) (*backends.Tensor, error) {
	shape := make([]int, len(n.Type.Shape))
	for i, d := range n.Type.Shape {
		shape[i] = int(d.N)
	}
	if n.Type.DType.IsFloat() {
		t := r.newF(n.Type.DType, shape...)
		copy(t.F32, f32s(n.Attrs.Floats("floats")))
		return t, nil
	}
	t := r.newI64(shape...)
	copy(t.I64, n.Attrs.Ints("ints"))
	return t, nil
}

func kState(r *run, n *ir.Node, _ []*backends.Tensor) (*backends.Tensor, error) {
	t, ok := r.env.State[stateName(n)]
	if !ok {
		return nil, fmt.Errorf("state %q not allocated", stateName(n))
	}
	return backends.HostTensor(t)
}

func kCast(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	to, _ := ir.ParseDType(n.Attrs.Str("to", ""))
	out := r.newFFull(to, a[0].Shape...) // every element is written
	kernels.ParallelChunks(len(out.F32), 1, func(lo, hi int) {
		copy(out.F32[lo:hi], a[0].F32[lo:hi])
		r.round(to, out.F32[lo:hi])
	})
	return out, nil
}

func kClamp(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	lo, hi := float32(math.Inf(-1)), float32(math.Inf(1))
	if _, ok := n.Attrs["lo"]; ok {
		lo = float32(n.Attrs.Float("lo", 0))
	}
	if _, ok := n.Attrs["hi"]; ok {
		hi = float32(n.Attrs.Float("hi", 0))
	}
	return unary(func(x float32) float32 { return min(max(x, lo), hi) })(r, n, a)
}

func kScalar(fn func(x, v float32) float32) kernel {
	return func(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
		v := float32(n.Attrs.Float("value", 0))
		return unary(func(x float32) float32 { return fn(x, v) })(r, n, a)
	}
}

func kMaskFill(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	out := r.newF(a[0].DType, a[0].Shape...)
	copy(out.F32, a[0].F32)
	kernels.ApplyCandidates(out.F32, a[1].U8)
	return out, nil
}

func kActQuant(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	out := r.newF(ir.BF16, a[0].Shape...)
	copy(out.F32, a[0].F32)
	block := int(n.Attrs.Int("block", 32))
	if r.fast {
		fast.ActQuant(out.F32, block)
		return out, nil
	}
	// blocks are independent: chunks of whole blocks on the worker pool
	if block > 0 && len(out.F32)%block == 0 {
		kernels.ParallelChunks(len(out.F32), block, func(lo, hi int) { numfmt.ActQuantInplace(out.F32[lo:hi], block) })
		return out, nil
	}
	numfmt.ActQuantInplace(out.F32, block) // (numfmt's checks decide)
	return out, nil
}

func kFP4Quant(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	out := r.newFFull(ir.BF16, a[0].Shape...) // every element is written
	block := int(n.Attrs.Int("block", 32))
	e4m3 := n.Attrs.Str("scale", "e8m0") == "e4m3"
	quant := numfmt.FP4ActQuantE8M0
	if e4m3 {
		quant = numfmt.FP4ActQuantE4M3
	}
	if r.fast { // bit-identical, without branches on the values
		quant = func(x []float32, block int, _ []byte, _ []float32) { fast.FP4ActQuant(x, block, e4m3) }
	}
	unit := block // blocks are independent: chunks of whole blocks
	if block <= 0 || len(out.F32)%block != 0 {
		unit = len(out.F32) // (numfmt's own checks decide)
	}
	kernels.ParallelChunks(len(out.F32), max(unit, 1), func(lo, hi int) {
		copy(out.F32[lo:hi], a[0].F32[lo:hi])
		quant(out.F32[lo:hi], block, nil, nil)
	})
	return out, nil
}

func reducedShape(n *ir.Node, s []int) ([]int, int) {
	ax := axis(n, len(s))
	out := cloneShape(s)
	if n.Attrs.Bool("keepdim", true) {
		out[ax] = 1
	} else {
		out = append(out[:ax], out[ax+1:]...)
	}
	return out, ax
}

func kMeanSq(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	shape, ax := reducedShape(n, a[0].Shape)
	if ax != len(a[0].Shape)-1 {
		return nil, fmt.Errorf("mean_sq supports the last axis only")
	}
	out := r.newF(a[0].DType, shape...)
	if r.fast {
		fast.MeanSquare(out.F32, a[0].F32, rows(a[0]), last(a[0])) // bit-identical
	} else {
		kernels.MeanSquare(out.F32, a[0].F32, rows(a[0]), last(a[0]))
	}
	r.round(a[0].DType, out.F32)
	return out, nil
}

func kSum(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	shape, ax := reducedShape(n, a[0].Shape)
	out := r.newF(a[0].DType, shape...)
	kernels.SumAxis(out.F32, a[0].F32, a[0].Shape, ax)
	r.round(a[0].DType, out.F32)
	return out, nil
}

func kSoftmax(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	if axis(n, len(a[0].Shape)) != len(a[0].Shape)-1 {
		return nil, fmt.Errorf("softmax supports the last axis only")
	}
	out := r.newF(a[0].DType, a[0].Shape...)
	kernels.Softmax(out.F32, a[0].F32, rows(a[0]), last(a[0]))
	r.round(a[0].DType, out.F32)
	return out, nil
}

func kReshape(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	shape, err := r.dimsOf(n.Attrs.Str("shape", ""), a[0].NumElements())
	if err != nil {
		return nil, err
	}
	t := *a[0]
	t.Shape = shape
	return &t, nil
}

// strided copies along one axis: outer × (axis part) × inner blocks.
func splitAxis(s []int, ax int) (outer, inner int) {
	outer, inner = 1, 1
	for i := 0; i < ax; i++ {
		outer *= s[i]
	}
	for i := ax + 1; i < len(s); i++ {
		inner *= s[i]
	}
	return
}

func kSlice(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x := a[0]
	ax := axis(n, len(x.Shape))
	st, en := int(n.Attrs.Int("start", 0)), int(n.Attrs.Int("end", 0))
	if en > x.Shape[ax] {
		return nil, fmt.Errorf("slice end %d beyond dim %d", en, x.Shape[ax])
	}
	return sliceAxis(r, x, ax, st, en), nil
}

// kLast is slice of the axis's last element (its start known only now).
func kLast(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x := a[0]
	ax := axis(n, len(x.Shape))
	d := x.Shape[ax]
	if d < 1 {
		return nil, fmt.Errorf("last of an empty axis %d", ax)
	}
	return sliceAxis(r, x, ax, d-1, d), nil
}

// sliceAxis copies elements st..en-1 along axis ax of x.
func sliceAxis(r *run, x *backends.Tensor, ax, st, en int) *backends.Tensor {
	shape := shapeCopy(x.Shape) // (on the stack: newF copies it)
	shape[ax] = en - st
	outer, inner := splitAxis(x.Shape, ax)
	out := r.newF(x.DType, shape...)
	for o := 0; o < outer; o++ {
		copy(out.F32[o*(en-st)*inner:(o+1)*(en-st)*inner], x.F32[(o*x.Shape[ax]+st)*inner:(o*x.Shape[ax]+en)*inner])
	}
	return out
}

func kConcat(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	ax := axis(n, len(a[0].Shape))
	shape := shapeCopy(a[0].Shape) // (on the stack: newF copies it)
	shape[ax] = 0
	for _, t := range a {
		shape[ax] += t.Shape[ax]
	}
	outer, inner := splitAxis(shape, ax)
	var out *backends.Tensor // in the node's arena slot
	switch {
	case a[0].DType.IsFloat():
		out = r.newFFull(a[0].DType, shape...) // every element is copied below
	case a[0].DType == ir.I32:
		out = r.newI32(shape...)
	default:
		out = r.newI64(shape...)
	}
	off := 0
	for _, t := range a {
		w := t.Shape[ax] * inner
		for o := 0; o < outer; o++ {
			dst := o*shape[ax]*inner + off
			switch {
			case out.F32 != nil:
				copy(out.F32[dst:dst+w], t.F32[o*w:(o+1)*w])
			case out.I32 != nil:
				copy(out.I32[dst:dst+w], t.I32[o*w:(o+1)*w])
			default:
				copy(out.I64[dst:dst+w], t.I64[o*w:(o+1)*w])
			}
		}
		off += w
	}
	return out, nil
}

func kExpand(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x := a[0]
	ax, k := int(n.Attrs.Int("axis", 0)), int(n.Attrs.Int("n", 1))
	shape := append(cloneShape(x.Shape[:ax]), append([]int{k}, x.Shape[ax:]...)...)
	inner := 1 // elements of x after the new axis
	for _, d := range x.Shape[ax:] {
		inner *= d
	}
	out := r.newFFull(x.DType, shape...) // every element is copied below
	o1 := x.NumElements() / max(inner, 1)
	for o := 0; o < o1; o++ {
		for j := 0; j < k; j++ {
			copy(out.F32[(o*k+j)*inner:(o*k+j+1)*inner], x.F32[o*inner:(o+1)*inner])
		}
	}
	return out, nil
}

func kEmbed(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	tab, ids := a[0], a[1]
	V, D := tab.Shape[0], tab.Shape[1]
	out := r.newF(tab.DType, append(cloneShape(ids.Shape), D)...)
	raw := tab.F32 == nil && storedBF16(tab)
	for i, id := range ids.I64 {
		if id < 0 || int(id) >= V {
			return nil, fmt.Errorf("token id %d out of range [0,%d)", id, V)
		}
		if raw {
			fast.WidenBF16(out.F32[i*D:(i+1)*D], tab.U8[2*int(id)*D:2*(int(id)+1)*D])
			continue
		}
		copy(out.F32[i*D:(i+1)*D], tab.F32[int(id)*D:(int(id)+1)*D])
	}
	return out, nil
}

func kTokenMap(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	m, ids := a[0], a[1]
	out := r.newI64(ids.Shape...)
	for i, id := range ids.I64 {
		if id < 0 || int(id) >= len(m.I64) {
			return nil, fmt.Errorf("token id %d out of range of the Engram token map [0,%d)", id, len(m.I64))
		}
		out.I64[i] = m.I64[id]
	}
	return out, nil
}

func kGather(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, idx := a[0], a[1]
	E, k := x.Shape[1], idx.Shape[1]
	out := r.newF(x.DType, idx.Shape...)
	for i := 0; i < idx.Shape[0]; i++ {
		for j := 0; j < k; j++ {
			out.F32[i*k+j] = x.F32[i*E+int(idx.I64[i*k+j])]
		}
	}
	return out, nil
}

// descending orders a before b when a > b (sort.SliceStable's less of
// a > b, as a comparison: NaN equal to everything).
func descending(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// kTopkIdx: the k largest per row, by value descending, ties to the lower index.
func kTopkIdx(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x := a[0]
	N, E, k := x.Shape[0], x.Shape[1], int(n.Attrs.Int("k", 1))
	out := r.newI64(N, k)
	ord := make([]int, E)
	for i := 0; i < N; i++ {
		row := x.F32[i*E : (i+1)*E]
		for j := range ord {
			ord[j] = j
		}
		slices.SortStableFunc(ord, func(p, q int) int { return descending(row[p], row[q]) })
		for j := 0; j < k; j++ {
			out.I64[i*k+j] = int64(ord[j])
		}
	}
	return out, nil
}

func kMatmul(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, w := a[0], a[1]
	N, K := w.Shape[0], w.Shape[1]
	shape := shapeCopy(x.Shape) // (on the stack: newF copies it)
	shape[len(shape)-1] = N
	var out *backends.Tensor
	if r.fast {
		out = r.newFFull(x.DType, shape...) // every element written (TestMatmulsOverwrite)
	} else {
		out = r.newF(x.DType, shape...)
	}
	perRow := r.perRow()
	if storedBF16(w) && r.fast {
		// the bf16 view (half the bytes of the F32 copy), bit-identical
		f32, bf16 := fast.MatmulF32W16, fast.MatmulBF16W16
		if perRow {
			f32, bf16 = fast.MatmulF32W16PerRow, fast.MatmulBF16W16PerRow
		} else if r.packed() {
			f32, bf16 = fast.MatmulF32W16Packed, fast.MatmulBF16W16Packed
		}
		if x.DType == ir.F32 {
			f32(out.F32, x.F32, w.U8, rows(x), K, N)
		} else {
			bf16(out.F32, x.F32, w.U8, rows(x), K, N)
			r.round(x.DType, out.F32)
		}
		return out, nil
	}
	w = widened(w)
	f32, bf16 := fast.MatmulF32, fast.MatmulBF16
	if perRow {
		f32, bf16 = fast.MatmulF32PerRow, fast.MatmulBF16PerRow
	} else if r.packed() {
		f32, bf16 = fast.MatmulF32Packed, fast.MatmulBF16Packed
	}
	if x.DType == ir.F32 && r.fast {
		f32(out.F32, x.F32, w.F32, rows(x), K, N)
	} else if x.DType == ir.F32 {
		kernels.MatmulF32(out.F32, x.F32, w.F32, rows(x), K, N)
	} else if r.fast {
		bf16(out.F32, x.F32, w.F32, rows(x), K, N)
		r.round(x.DType, out.F32)
	} else {
		kernels.MatmulBF16(out.F32, x.F32, w.F32, rows(x), K, N)
		r.round(x.DType, out.F32)
	}
	return out, nil
}

func kMatmulQ(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, w := a[0], a[1]
	N, K := w.Shape[0], w.Shape[1]
	shape := shapeCopy(x.Shape) // (on the stack: newF copies it)
	shape[len(shape)-1] = N
	var out *backends.Tensor
	if r.fast {
		out = r.newFFull(ir.BF16, shape...) // every element written (TestMatmulsOverwrite)
	} else {
		out = r.newF(ir.BF16, shape...)
	}
	fp4, fp8 := fast.MatmulFP4, fast.MatmulFP8
	if r.perRow() {
		fp4, fp8 = fast.MatmulFP4PerRow, fast.MatmulFP8PerRow
	} else if r.packed() {
		fp4, fp8 = fast.MatmulFP4Packed, fast.MatmulFP8Packed
	}
	if r.fast && w.DType == ir.FP4E2M1 {
		fp4(out.F32, x.F32, rows(x), K, w.U8, w.Scale, N)
	} else if r.fast {
		fp8(out.F32, x.F32, rows(x), K, w.U8, w.Scale, N)
	} else if w.DType == ir.FP4E2M1 {
		kernels.MatmulFP4(out.F32, x.F32, rows(x), K, w.U8, w.Scale, N)
	} else {
		kernels.MatmulFP8(out.F32, x.F32, rows(x), K, w.U8, w.Scale, N)
	}
	return out, nil
}

func kGrouped(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, w := a[0], a[1]
	G := int(n.Attrs.Int("groups", 1))
	shape := shapeCopy(x.Shape) // (on the stack: newF copies it)
	shape[len(shape)-1] = w.Shape[0]
	out := r.newF(ir.BF16, shape...)
	grouped := fast.GroupedLoRA
	if r.perRow() {
		grouped = fast.GroupedLoRAPerRow
	} else if r.packed() {
		grouped = fast.GroupedLoRAPacked
	}
	if r.fast && storedFP8(w) {
		// wo_a as stored, dequantised on the fly; bit-identical to the
		// reference on the dequantised matrix
		grouped(out.F32, x.F32, rows(x), G, w.Shape[1], nil, w.U8, w.Scale, w.Shape[0]/G)
		return out, nil
	}
	w = widened(w)
	if r.fast {
		grouped(out.F32, x.F32, rows(x), G, w.Shape[1], w.F32, nil, nil, w.Shape[0]/G)
		return out, nil
	}
	kernels.GroupedLoRA(out.F32, x.F32, rows(x), G, w.Shape[1], w.F32, w.Shape[0]/G)
	return out, nil
}

func kExpertMatmul(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, w, idx := a[0], a[1], a[2]
	N, k := idx.Shape[0], idx.Shape[1]
	O, K := w.Shape[1], w.Shape[2]
	out := r.newFFull(ir.BF16, N, k, O) // every element is written (TestExpertMatmulOverwrite)
	perSlot := len(x.Shape) == 3
	if r.fast {
		experts := fast.ExpertMatmul
		if r.perRow() {
			experts = fast.ExpertMatmulPerRow
		}
		err := experts(out.F32, x.F32, N, k, K, O, perSlot, idx.I64, func(e int) (fast.Expert, bool) {
			if e < 0 || e >= len(w.Parts) {
				return fast.Expert{}, false
			}
			p := w.Parts[e]
			return fast.Expert{FP4: p.DType == ir.FP4E2M1, Codes: p.U8, Scales: p.Scale}, true
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	for i := 0; i < N; i++ {
		for j := 0; j < k; j++ {
			e := int(idx.I64[i*k+j])
			if e < 0 || e >= len(w.Parts) {
				return nil, fmt.Errorf("expert %d out of range", e)
			}
			p := w.Parts[e]
			xs := x.F32[i*K : (i+1)*K]
			if perSlot {
				xs = x.F32[(i*k+j)*K : (i*k+j+1)*K]
			}
			dst := out.F32[(i*k+j)*O : (i*k+j+1)*O]
			if p.DType == ir.FP4E2M1 {
				kernels.MatmulFP4(dst, xs, 1, K, p.U8, p.Scale, O)
			} else {
				kernels.MatmulFP8(dst, xs, 1, K, p.U8, p.Scale, O)
			}
		}
	}
	return out, nil
}

// kMoECombine sums the expert outputs of each token in increasing expert id
// order, as the reference's loop over experts accumulates them.
func kMoECombine(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	y, idx := a[0], a[1]
	N, k, D := y.Shape[0], y.Shape[1], y.Shape[2]
	out := r.newF(ir.F32, N, D)
	// tokens are independent: chunks of whole tokens
	kernels.ParallelChunks(N*D, D, func(lo, hi int) {
		ord := make([]int, k)
		for i := lo / D; i < hi/D; i++ {
			for j := range ord {
				ord[j] = j
			}
			slices.SortFunc(ord, func(p, q int) int { return cmp.Compare(idx.I64[i*k+p], idx.I64[i*k+q]) }) // (distinct experts)
			acc := out.F32[i*D : (i+1)*D]
			for _, j := range ord {
				src := y.F32[(i*k+j)*D : (i*k+j+1)*D]
				for d := range acc {
					acc[d] += src[d]
				}
			}
		}
	})
	return out, nil
}

func kRMSNorm(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, w := a[0], a[1]
	out := r.newFFull(x.DType, x.Shape...) // every element is written
	if r.fast {
		fast.RMSNorm(out.F32, x.F32, rows(x), last(x), w.F32, float32(n.Attrs.Float("eps", 0))) // bit-identical
	} else {
		kernels.RMSNorm(out.F32, x.F32, rows(x), last(x), w.F32, float32(n.Attrs.Float("eps", 0)))
	}
	r.round(x.DType, out.F32)
	return out, nil
}

// perToken broadcasts a per-token mix (possibly a constant [hc]) to [tokens, hc].
func perToken(p *backends.Tensor, tokens, hc int) []float32 {
	if len(p.F32) == tokens*hc {
		return p.F32
	}
	out := make([]float32, tokens*hc)
	for t := 0; t < tokens; t++ {
		copy(out[t*hc:(t+1)*hc], p.F32[len(p.F32)-hc:])
	}
	return out
}

func kHCPre(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	h := a[0]
	s := h.Shape
	hc, D := s[len(s)-2], s[len(s)-1]
	tokens := h.NumElements() / (hc * D)
	out := r.newFFull(ir.BF16, append(cloneShape(s[:len(s)-2]), D)...) // every element is written
	if r.fast {
		fast.HCPre(out.F32, h.F32, perToken(a[1], tokens, hc), tokens, hc, D) // bit-identical
	} else {
		kernels.HCPre(out.F32, h.F32, perToken(a[1], tokens, hc), tokens, hc, D)
	}
	return out, nil
}

func kHCPost(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	y, res, post, comb := a[0], a[1], a[2], a[3]
	s := res.Shape
	hc, D := s[len(s)-2], s[len(s)-1]
	tokens := res.NumElements() / (hc * D)
	out := r.newFFull(ir.BF16, s...) // every element is written
	if r.fast {
		fast.HCPost(out.F32, y.F32, res.F32, post.F32, comb.F32, tokens, hc, D)
	} else {
		kernels.HCPost(out.F32, y.F32, res.F32, post.F32, comb.F32, tokens, hc, D)
	}
	return out, nil
}

// rowStarts are the start positions of a call of B rows: start_pos i64[]
// (every row's) or, in a ragged call (backends.RegisterRowPositions), i64[B]
// (each row's own).
func rowStarts(sp *backends.Tensor, B int) ([]int, error) {
	out := make([]int, B)
	switch {
	case len(sp.Shape) == 0 && len(sp.I64) == 1:
		for b := range out {
			out[b] = int(sp.I64[0])
		}
	case len(sp.Shape) == 1 && sp.Shape[0] == B && len(sp.I64) == B:
		for b := range out {
			out[b] = int(sp.I64[b])
		}
	default:
		return nil, fmt.Errorf("start_pos of shape %v for %d rows", sp.Shape, B)
	}
	return out, nil
}

func kPositions(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	S, P := a[0].Shape[1], int(a[1].I64[0])
	ratio := int(n.Attrs.Int("ratio", 1))
	if ratio == 1 && len(a[1].Shape) == 1 { // a ragged call's start positions i64[B]: i64[B,S], each row's own
		ps, err := rowStarts(a[1], a[1].Shape[0])
		if err != nil {
			return nil, err
		}
		out := r.newI64(len(ps), S)
		for b, p := range ps {
			for t := range S {
				out.I64[b*S+t] = int64(p + t)
			}
		}
		return out, nil
	}
	if ratio == 1 {
		out := r.newI64(S)
		for t := range out.I64 {
			out.I64[t] = int64(P + t)
		}
		return out, nil
	}
	if len(a[1].Shape) != 0 {
		return nil, fmt.Errorf("positions of ratio %d: start_pos of shape %v (one position per call)", ratio, a[1].Shape)
	}
	g0, g1 := P/ratio, (P+S)/ratio
	out := r.newI64(g1 - g0)
	for g := g0; g < g1; g++ {
		out.I64[g-g0] = int64(g * ratio)
	}
	return out, nil
}

func kRope(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	x, tab, pos := a[0], a[1], a[2]
	out := r.newFFull(x.DType, x.Shape...) // every element is written below
	if x.NumElements() == 0 {
		return out, nil
	}
	W := last(x)
	T := x.Shape[1]
	perT := x.NumElements() / (x.Shape[0] * T * W) // rows per (b, t)
	nrows := rows(x)
	ps := make([]int, nrows)
	perRow := len(pos.I64) == x.Shape[0]*T && len(pos.Shape) == 2 // a ragged call's [B, T]: each row's own
	for i := range ps {
		t := (i / perT) % T
		if perRow {
			t += i / (perT * T) * T
		}
		p := int(pos.I64[t])
		if p < 0 || p >= tab.Shape[0] {
			return nil, fmt.Errorf("position %d beyond the RoPE table (max length %d)", p, tab.Shape[0])
		}
		ps[i] = p
	}
	// rows are independent: chunks of whole rows
	kernels.ParallelChunks(nrows*W, W, func(lo, hi int) {
		copy(out.F32[lo:hi], x.F32[lo:hi])
		kernels.Rotary(out.F32[lo:hi], (hi-lo)/W, W, int(n.Attrs.Int("dim", 0)), tab.F32, ps[lo/W:hi/W], n.Attrs.Bool("inverse", false))
		r.round(x.DType, out.F32[lo:hi])
	})
	return out, nil
}

func kWindowIdx(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	B, S := a[0].Shape[0], a[0].Shape[1]
	ps, err := rowStarts(a[1], B)
	if err != nil {
		return nil, err
	}
	W := int(n.Attrs.Int("window", 0))
	var one []int32
	var T int
	decode := n.Attrs.Str("phase", "") == "decode"
	switch {
	case decode:
		one, T = kernels.WindowIdxDecode(ps[0], W), W
	case n.Attrs.Str("phase", "") == "chunk":
		if len(a[1].Shape) != 0 {
			return nil, fmt.Errorf("window_idx of a chunk: start_pos of shape %v (one position per call)", a[1].Shape)
		}
		one, T = kernels.WindowIdxChunk(ps[0], S, W), W
	default:
		one, T = kernels.WindowIdxPrefill(S, W), min(S, W)
	}
	out := r.newI32(B, S, T)
	for b := 0; b < B; b++ {
		if decode && b > 0 && ps[b] != ps[b-1] {
			one = kernels.WindowIdxDecode(ps[b], W)
		}
		copy(out.I32[b*S*T:(b+1)*S*T], one)
	}
	return out, nil
}

func kWindowUpdate(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	ring, kv := a[0], a[1]
	B, W, D := ring.Shape[0], ring.Shape[1], ring.Shape[2]
	if len(a[2].Shape) == 1 { // a ragged call: each row at its own position
		ps, err := rowStarts(a[2], B)
		if err != nil {
			return nil, err
		}
		S := kv.Shape[1]
		for b, p := range ps {
			rb, kb := ring.F32[b*W*D:(b+1)*W*D], kv.F32[b*S*D:(b+1)*S*D]
			if p == 0 {
				kernels.WindowWritePrefill(rb, 1, W, D, kb, S)
			} else {
				kernels.WindowWriteDecode(rb, 1, W, D, kb, p)
			}
		}
		return ring, nil
	}
	P := int(a[2].I64[0])
	if P == 0 {
		kernels.WindowWritePrefill(ring.F32, B, W, D, kv.F32, kv.Shape[1])
	} else {
		kernels.WindowWriteChunk(ring.F32, B, W, D, kv.F32, kv.Shape[1], P) // decode: one row
	}
	return ring, nil
}

func kSparseAttn(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	q, kv, sink, idx := a[0], a[1], a[2], a[3]
	B, M, H, D := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	N, T := kv.Shape[1], idx.Shape[2]
	var kv2 []float32 // the rows after kv's (the compressed ones), read in place
	N2 := 0
	if len(a) == 5 {
		kv2, N2 = a[4].F32, a[4].Shape[1]
	}
	for _, i := range idx.I32 {
		if int(i) >= N+N2 {
			return nil, fmt.Errorf("attention index %d beyond %d kv rows", i, N+N2)
		}
	}
	out := r.newF(ir.BF16, q.Shape...)
	if r.fast {
		// f32 dot products where the reference sums in float64: a few outputs
		// differ in the last bf16 bit (backendtest bounds it)
		fast.SparseAttnSplit(out.F32, q.F32, B, M, H, D, kv.F32, N, kv2, N2, sink.F32, idx.I32, T, float32(n.Attrs.Float("scale", 1)))
	} else {
		kernels.SparseAttnSplit(out.F32, q.F32, B, M, H, D, kv.F32, N, kv2, N2, sink.F32, idx.I32, T, float32(n.Attrs.Float("scale", 1)))
	}
	return out, nil
}

func kGroupState(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	st, x := a[0], a[1]
	B, R, D := st.Shape[0], st.Shape[1], st.Shape[2]
	S, P := x.Shape[1], int(a[2].I64[0])
	if P > 0 && S > 1 { // a chunk call: its tail group
		kernels.GroupStateChunk(st.F32, x.F32, B, S, D, R, P)
		return st, nil
	}
	for b := 0; b < B; b++ {
		if P == 0 {
			if S%R == 0 {
				continue
			}
			// The incomplete tail group goes to slots 0.. of the state.
			for t := S - S%R; t < S; t++ {
				copy(st.F32[(b*R+t%R)*D:(b*R+t%R+1)*D], x.F32[(b*S+t)*D:(b*S+t+1)*D])
			}
		} else {
			slot := P % R
			copy(st.F32[(b*R+slot)*D:(b*R+slot+1)*D], x.F32[b*S*D:(b*S+1)*D])
		}
	}
	return st, nil
}

func kCompressorPool(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	c, z, kvst, scst := a[0], a[1], a[2], a[3]
	P := int(a[4].I64[0])
	R := int(n.Attrs.Int("ratio", 2))
	B, S, D := c.Shape[0], c.Shape[1], c.Shape[2]
	G := (P+S)/R - P/R
	out := r.newF(ir.F32, B, G, D)
	if P == 0 {
		kernels.CompressorPool(out.F32, c.F32, z.F32, B, S, D, R, kvst.F32, scst.F32, P)
	} else {
		// decode or a chunk: the group's earlier tokens from the state (a
		// chunk passes it as the previous call left it), its others from c, z
		kernels.CompressorPoolChunk(out.F32, c.F32, z.F32, B, S, D, R, kvst.F32, scst.F32, P)
	}
	return out, nil
}

func kCacheWrite(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	cache, rowsT := a[0], a[1]
	B, Mr, D := cache.Shape[0], cache.Shape[1], cache.Shape[2]
	G := rowsT.Shape[1]
	at := int(a[2].I64[0]) / int(n.Attrs.Int("ratio", 1))
	if at+G > Mr {
		return nil, fmt.Errorf("cache of %d rows cannot take rows %d..%d (maximum length too small)", Mr, at, at+G)
	}
	for b := 0; b < B; b++ {
		copy(cache.F32[(b*Mr+at)*D:(b*Mr+at+G)*D], rowsT.F32[b*G*D:(b+1)*G*D])
	}
	return cache, nil
}

func kCacheRead(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	cache := a[0]
	B, Mr, D := cache.Shape[0], cache.Shape[1], cache.Shape[2]
	nc := (int(a[2].I64[0]) + a[1].Shape[1]) / int(n.Attrs.Int("ratio", 1))
	if nc > Mr {
		return nil, fmt.Errorf("cache of %d rows read to %d", Mr, nc)
	}
	if B == 1 || nc == Mr {
		// the rows are contiguous in the cache: a view, no copy (the cache
		// is not written again in this call after its cache_write; the
		// attention reads the compressed rows of a long prompt in place)
		return &backends.Tensor{DType: cache.DType, Shape: []int{B, nc, D}, F32: cache.F32[: B*Mr*D : B*Mr*D][:B*nc*D]}, nil
	}
	out := r.newF(cache.DType, B, nc, D)
	for b := 0; b < B; b++ {
		copy(out.F32[b*nc*D:(b+1)*nc*D], cache.F32[b*Mr*D:(b*Mr+nc)*D])
	}
	return out, nil
}

func kIndexScore(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	q, k, w := a[0], a[1], a[2]
	B, S, H, Di := q.Shape[0], q.Shape[1], q.Shape[2], q.Shape[3]
	nc := k.Shape[1]
	out := r.newF(ir.BF16, B, S, nc)
	if r.fast {
		fast.IndexScore(out.F32, q.F32, B, S, H, Di, k.F32, nc, w.F32) // bit-identical
	} else {
		kernels.IndexScore(out.F32, q.F32, B, S, H, Di, k.F32, nc, w.F32)
	}
	return out, nil
}

func kIndexMask(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	s := a[0]
	out := r.newF(s.DType, s.Shape...)
	copy(out.F32, s.F32)
	kernels.IndexCausalMask(out.F32, s.Shape[0], s.Shape[1], s.Shape[2], int(a[1].I64[0]), int(n.Attrs.Int("ratio", 1)))
	return out, nil
}

func kCandidates(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	s := a[0]
	B, S, nc := s.Shape[0], s.Shape[1], s.Shape[2]
	out := &backends.Tensor{DType: ir.U8, Shape: cloneShape(s.Shape), U8: make([]byte, s.NumElements())}
	lens := kernels.IndexVisibleLens(S, int(a[1].I64[0]), int(n.Attrs.Int("ratio", 1)))
	if nc > 0 {
		kernels.SelectCandidateBlocks(out.U8, s.F32, B*S, nc, lens, int(n.Attrs.Int("topk_blocks", 1)), int(n.Attrs.Int("block", 1)))
	}
	return out, nil
}

func kIndexTopk(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	s := a[0]
	B, S, nc := s.Shape[0], s.Shape[1], s.Shape[2]
	k := min(int(n.Attrs.Int("k", 1)), nc)
	out := r.newI32(B, S, k)
	if k > 0 {
		lens := kernels.IndexVisibleLens(S, int(a[1].I64[0]), int(n.Attrs.Int("ratio", 1)))
		kernels.IndexTopK(out.I32, s.F32, B*S, nc, k, lens, a[2].Shape[1])
	}
	return out, nil
}

func kEngramHist(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	h, ids := a[0], a[1]
	B, M := h.Shape[0], h.Shape[1]
	S := ids.Shape[1]
	ps, err := rowStarts(a[2], B)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p+S > M {
			return nil, fmt.Errorf("positions %d..%d beyond the maximum length %d", p, p+S-1, M)
		}
	}
	if len(a[2].Shape) == 1 { // a ragged call: each row at its own position
		for b, p := range ps {
			kernels.EngramHistoryWrite(h.I64[b*M:(b+1)*M], 1, M, ids.I64[b*S:(b+1)*S], S, p)
		}
		return h, nil
	}
	kernels.EngramHistoryWrite(h.I64, B, M, ids.I64, S, ps[0])
	return h, nil
}

func kEngramHash(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	h, tok := a[0], a[1]
	B, M := h.Shape[0], h.Shape[1]
	S := tok.Shape[1]
	ps, err := rowStarts(a[2], B)
	if err != nil {
		return nil, err
	}
	mult, primes, offs := n.Attrs.Ints("multipliers"), n.Attrs.Ints("primes"), n.Attrs.Ints("offsets")
	heads := int(n.Attrs.Int("heads", 1))
	var pr [][]int64
	for i := 0; i+heads <= len(primes); i += heads {
		pr = append(pr, primes[i:i+heads])
	}
	out := r.newI64(B, S, len(primes))
	if len(a[2].Shape) == 1 { // a ragged call: each row at its own position
		n := S * len(primes)
		for b, p := range ps {
			kernels.EngramHash(out.I64[b*n:(b+1)*n], h.I64[b*M:(b+1)*M], 1, M, S, p, [][]int64{mult}, [][][]int64{pr}, [][]int64{offs}, a[3].I64[0])
		}
		return out, nil
	}
	kernels.EngramHash(out.I64, h.I64, B, M, S, ps[0], [][]int64{mult}, [][][]int64{pr}, [][]int64{offs}, a[3].I64[0])
	return out, nil
}

func kEngramLookup(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	tab, rowsT := a[0], a[1]
	W := tab.Shape[1]
	for _, v := range rowsT.I64 {
		if v < 0 || int(v) >= tab.Shape[0] {
			return nil, fmt.Errorf("engram row %d out of range %d", v, tab.Shape[0])
		}
	}
	out := r.newF(ir.BF16, rowsT.Shape[0], rowsT.Shape[1], rowsT.Shape[2]*W)
	kernels.EngramLookup(out.F32, tab.U8, tab.Scale, W, rowsT.I64)
	return out, nil
}

func kEngramGate(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	h, key, val, om := a[0], a[1], a[2], a[3]
	s := h.Shape
	hc, D := s[2], s[3]
	tokens := s[0] * s[1]
	out := r.newF(ir.BF16, s...)
	kernels.EngramGate(out.F32, h.F32, tokens, hc, D, key.F32, val.F32, om.F32, float32(n.Attrs.Float("eps", 0)))
	return out, nil
}

func kProbe(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	if r.env.Probe == nil {
		return a[0], nil
	}
	return host(r.env.Probe(n.Attrs.Str("name", ""), n.Attrs.Bool("force", false), a[0]))
}

func kHCMix(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	h, fn := a[0], a[1]
	s := h.Shape
	hc, D := s[len(s)-2], s[len(s)-1]
	tokens := h.NumElements() / (hc * D)
	mix := fn.Shape[0]
	out := r.newF(ir.F32, append(cloneShape(s[:len(s)-2]), mix)...)
	if r.fast {
		var panels *fast.HCPanels
		if r.state != nil {
			panels = &r.state.hcPanels
		}
		fast.HCMixes(out.F32, h.F32, tokens, hc, D, fn.F32, float32(n.Attrs.Float("eps", 0)), panels) // bit-identical
	} else {
		kernels.HCMixes(out.F32, h.F32, tokens, hc, D, fn.F32, float32(n.Attrs.Float("eps", 0)))
	}
	return out, nil
}

func kSinkhorn(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	m, scale, base := a[0], a[1], a[2]
	hc := int(n.Attrs.Int("hc", 4))
	mix := (2 + hc) * hc
	tokens := m.NumElements() / mix
	iters, eps := int(n.Attrs.Int("iters", 20)), float32(n.Attrs.Float("eps", 0))
	if r.fast && hc == 4 {
		out := r.newFFull(ir.F32, m.Shape...)
		fast.HCSplitSinkhorn4(out.F32, m.F32, tokens, scale.F32, base.F32, iters, eps) // bit-identical
		return out, nil
	}
	pre, post, comb := make([]float32, tokens*hc), make([]float32, tokens*hc), make([]float32, tokens*hc*hc)
	kernels.HCSplitSinkhorn(pre, post, comb, m.F32, tokens, hc, scale.F32, base.F32, iters, eps)
	out := r.newF(ir.F32, m.Shape...)
	for t := 0; t < tokens; t++ {
		o := out.F32[t*mix : (t+1)*mix]
		copy(o[:hc], pre[t*hc:(t+1)*hc])
		copy(o[hc:2*hc], post[t*hc:(t+1)*hc])
		copy(o[2*hc:], comb[t*hc*hc:(t+1)*hc*hc])
	}
	return out, nil
}

func kSwiGLU(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
	g, u := a[0], a[1]
	var w []float32
	if len(a) > 2 {
		w = a[2].F32
	}
	inter := last(g)
	out := r.newF(ir.BF16, g.Shape...)
	if r.fast {
		fast.SwiGLUClamp(out.F32, g.F32, u.F32, rows(g), inter, float32(n.Attrs.Float("limit", 0)), w)
	} else {
		kernels.SwiGLUClamp(out.F32, g.F32, u.F32, rows(g), inter, float32(n.Attrs.Float("limit", 0)), w)
	}
	return out, nil
}
