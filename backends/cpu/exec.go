package cpu

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/fast"
	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/backends/cpu/workpool"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// The CPU runs as two registered backends over one kernel table:
// "cpu-ref" runs every op with the reference kernels (written to be
// obviously right; other backends are checked against it), "cpu" runs the
// ops that have an optimised kernel (backends/cpu/fast) and falls back to
// cpu-ref, through the capabilities, for the rest. Both are host backends
// (their buffers are *backends.Tensor), so a value crossing between them
// is handed over, not copied.
type Backend struct {
	name string
	fast bool
}

func init() {
	backends.Register(Backend{name: "cpu-ref"})
	backends.Register(Backend{name: "cpu", fast: true})
	backends.RegisterInline(workpool.Inline)
	backends.RegisterLanes(workpool.Lanes)
}

// Name implements backends.Backend.
func (b Backend) Name() string { return b.name }

// Available implements backends.Backend: the CPU is always there.
func (Backend) Available() error { return nil }

// fastOps are the ops "cpu" runs: those with an optimised kernel (the
// products, norms, attention, hyper-connection mixes, quantisation), the
// elementwise ops whose bf16 rounding is vectorised, and the sources, views
// and plain data movement that have one host implementation (so that the
// values between two fast ops do not cross to cpu-ref and back: every
// crossing costs a launch). The model's stateful and selection ops (caches,
// compressor, indexer, Engram) run on cpu-ref.
var fastOps = []string{
	"act_quant", "fp4_quant", "mean_sq", "matmul", "matmul_fp8", "matmul_fp4", "grouped_matmul", "expert_matmul",
	"rmsnorm", "hc_pre", "hc_post", "sparse_attn", "index_score", "hc_mix", "swiglu_clamp",
	"cast", "sigmoid", "silu", "rsqrt", "sqrt", "exp", "relu", "softplus", "clamp", "add_scalar", "mul_scalar",
	"add", "sub", "mul", "div", "sum", "softmax", "rope",
	"input", "weight", "const", "state", "rope_table", "reshape", "probe",
	"slice", "last", "concat", "expand", "gather", "embed", "positions", "mask_fill", "topk_idx", "moe_combine", "hc_split_sinkhorn",
}

// Capabilities implements backends.Backend.
func (b Backend) Capabilities() backends.Capabilities {
	ops := map[string][]ir.DType{}
	if !b.fast {
		for op := range kernelsByOp {
			ops[op] = nil
		}
		return backends.Capabilities{Ops: ops, Host: true}
	}
	for _, op := range fastOps {
		ops[op] = nil
	}
	return backends.Capabilities{Ops: ops, Fallback: "cpu-ref", Host: true}
}

// Open implements backends.Backend.
func (b Backend) Open() (backends.Device, error) {
	desc := "host, reference kernels (pure Go)"
	if b.fast {
		desc = "host, " + fast.CurrentLevel().String() + " kernels"
	}
	return &backends.HostDevice{Backend: b.name, Desc: desc, Kernel: b.kernel, Bind: BindWeight}, nil
}

// BindWeight lays out a weight for the CPU kernels: bf16 matrices and fp8
// wo_a as stored (the kernels widen on the fly, bit-identically), the rest
// as backends.HostWeightTensor does.
func BindWeight(w *backends.HostWeight) (*backends.Tensor, error) {
	return backends.HostWeightTensor(w, false)
}

// kernel returns the kernel of one node (its state lives as long as the
// program).
func (b Backend) kernel(n *ir.Node) (backends.HostKernel, error) {
	k, ok := kernelsByOp[n.Op]
	if !ok {
		return nil, fmt.Errorf("no CPU kernel for op %s", n.Op)
	}
	st := &nodeState{}
	fast := b.fast
	n0, slot0 := n, nodeSlot(n)
	return func(env *backends.Env, n *ir.Node, args []*backends.Tensor) (*backends.Tensor, error) {
		arena, _ := env.Arena.(*backends.HostArena)
		r := runPool.Get().(*run) // (a kernel keeps nothing of its run past its return)
		slot := slot0
		if n != n0 {
			slot = nodeSlot(n)
		}
		*r = run{env: env, arena: arena, node: n, outSlot: slot, outSlotKnown: true, state: st, fast: fast}
		defer func() { *r = run{}; runPool.Put(r) }()
		return k(r, n, args)
	}, nil
}

// runPool recycles the runs of kernel calls (a decode step makes
// thousands).
var runPool = sync.Pool{New: func() any { return new(run) }}

// run is what a kernel sees of one call.
type run struct {
	env          *backends.Env
	arena        *backends.HostArena // nil: fresh memory
	node         *ir.Node            // the node being computed; its buf attribute names its arena slot
	outSlot      int                 // that slot, read once per program (-1: none) ...
	outSlotKnown bool                // ... when set, else read from node
	state        *nodeState          // the node's state across calls (nil outside a program)
	fast         bool                // the optimised kernels (backend "cpu"), else the reference ones
}

// nodeState is what a node's kernel keeps between the calls of one
// program (it lives and dies with the program).
type nodeState struct {
	hcPanels fast.HCPanels // hc_mix: fn as 4-lane panels for decode
}

type kernel func(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error)

// perRow reports whether the call's rows are tokens of different sequences
// (a decode call, S = 1): the fast matmuls then compute every row as a
// one-row call would (fast.MatmulFP8PerRow, ...), so that a sequence's
// result does not depend on the batch it runs in.
func (r *run) perRow() bool { return r.env != nil && r.env.S == 1 && !r.env.Chunk }

// packed reports whether the call is a chunk of a longer prompt
// (Env.Chunk): the fast matmuls then compute every row as a call of many
// rows would (fast.MatmulFP8Packed, ...), whatever the chunk's rows.
func (r *run) packed() bool { return r.env != nil && r.env.Chunk }

// ---- helpers ---------------------------------------------------------------

// newF returns the zeroed output tensor of the current node: in its arena
// slot when the plan assigned one (attribute buf), else freshly allocated.
func (r *run) newF(dt ir.DType, shape ...int) *backends.Tensor {
	t := newTensor(dt, shape)
	t.F32 = r.arena.F32(r.slot(), t.NumElements())
	return t
}

// newFFull is newF for a kernel that writes every element: the slot is not
// zeroed first.
func (r *run) newFFull(dt ir.DType, shape ...int) *backends.Tensor {
	t := newTensor(dt, shape)
	t.F32 = r.arena.F32Dirty(r.slot(), t.NumElements())
	return t
}

func (r *run) newI64(shape ...int) *backends.Tensor {
	t := newTensor(ir.I64, shape)
	t.I64 = r.arena.I64(r.slot(), t.NumElements())
	return t
}

func (r *run) newI32(shape ...int) *backends.Tensor {
	t := newTensor(ir.I32, shape)
	t.I32 = r.arena.I32(r.slot(), t.NumElements())
	return t
}

// shapedTensor is a kernel's output tensor with room for its shape, so
// that the tensor and its shape are one allocation (a decode step makes
// thousands of them).
type shapedTensor struct {
	t    backends.Tensor
	dims [6]int
}

// newTensor is a tensor of dtype dt with a copy of shape (the caller's
// slice is not kept: a variadic shape stays on the caller's stack).
func newTensor(dt ir.DType, shape []int) *backends.Tensor {
	st := &shapedTensor{t: backends.Tensor{DType: dt}}
	if len(shape) <= len(st.dims) {
		n := copy(st.dims[:], shape)
		st.t.Shape = st.dims[:n:n]
	} else {
		st.t.Shape = append([]int(nil), shape...)
	}
	return &st.t
}

// slot is the arena slot of the current node's output (-1: none).
func (r *run) slot() int {
	if r.outSlotKnown {
		return r.outSlot
	}
	return nodeSlot(r.node)
}

// nodeSlot is n's arena slot (its buf attribute; -1: none, or no node).
func nodeSlot(n *ir.Node) int {
	if n == nil {
		return -1
	}
	if b, ok := n.Attrs["buf"].(int64); ok {
		return int(b)
	}
	return -1
}

// round applies the rounding of dtype dt to x in place.
func (r *run) round(dt ir.DType, x []float32) {
	switch dt {
	case ir.BF16:
		if r.fast {
			fast.BF16RoundSlice(x) // the same bits, in vectors
		} else {
			numfmt.BF16RoundSlice(x)
		}
	case ir.F16:
		for i, v := range x {
			x[i] = numfmt.F16ToF32(numfmt.F32ToF16(v))
		}
	}
}

func last(t *backends.Tensor) int { return t.Shape[len(t.Shape)-1] }

func rows(t *backends.Tensor) int { return t.NumElements() / max(last(t), 1) }

func cloneShape(s []int) []int { return append([]int(nil), s...) }

// shapeCopy is cloneShape for a shape that is only passed to newF and the
// like: with inlining, a shape of up to 6 dims is copied into an array the
// caller keeps on its stack.
func shapeCopy(s []int) []int {
	var a [6]int
	if len(s) <= len(a) {
		return append(a[:0], s...)
	}
	return cloneShape(s)
}

func unary(fn func(float32) float32) kernel {
	return func(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
		x := a[0]
		out := r.newFFull(x.DType, x.Shape...) // every element is written
		kernels.ParallelChunks(len(out.F32), 1, func(lo, hi int) {
			for i, v := range x.F32[lo:hi] {
				out.F32[lo+i] = fn(v)
			}
			r.round(x.DType, out.F32[lo:hi])
		})
		return out, nil
	}
}

func binary(fn func(a, b float32) float32) kernel {
	return func(r *run, n *ir.Node, a []*backends.Tensor) (*backends.Tensor, error) {
		x, y := a[0], a[1]
		shape, err := kernels.Broadcast(x.Shape, y.Shape)
		if err != nil {
			return nil, err
		}
		out := r.newFFull(x.DType, shape...) // every element is written
		xi, yi := bcastIndex(x.Shape, shape), bcastIndex(y.Shape, shape)
		kernels.ParallelChunks(len(out.F32), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out.F32[i] = fn(x.F32[xi(i)], y.F32[yi(i)])
			}
			r.round(x.DType, out.F32[lo:hi])
		})
		return out, nil
	}
}

// bcastIndex maps a flat index of the broadcast shape to the flat index of an
// operand of shape s.
func bcastIndex(s, full []int) func(int) int {
	if len(s) == len(full) {
		same := true
		for i := range s {
			same = same && s[i] == full[i]
		}
		if same {
			return func(i int) int { return i }
		}
	}
	n := len(full)
	strides := make([]int, n) // operand strides aligned to full, 0 where broadcast
	st := 1
	for i := n - 1; i >= 0; i-- {
		j := len(s) - n + i
		if j >= 0 && s[j] != 1 {
			strides[i] = st
		}
		if j >= 0 {
			st *= s[j]
		}
	}
	return func(i int) int {
		off := 0
		for d := n - 1; d >= 0; d-- {
			off += (i % full[d]) * strides[d]
			i /= full[d]
		}
		return off
	}
}

// dimsOf evaluates the text of a reshape target with the call's sizes.
func (r *run) dimsOf(shape string, numel int) ([]int, error) {
	sh, err := parsedShape(shape)
	if err != nil {
		return nil, err
	}
	e := r.env
	dims, err := ir.Bindings{B: int64(e.B), S: int64(e.S), M: int64(e.M), P: int64(e.StartPos)}.Dims(sh)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(dims))
	known := 1
	for i, v := range dims {
		out[i] = int(v)
		known *= out[i]
	}
	if known != numel {
		return nil, fmt.Errorf("reshape of %d elements to %s = %v", numel, shape, out)
	}
	return out, nil
}

// parsedShapes caches ir.ParseShape of the shape attributes the kernels
// read on every call (a decode step reshapes ~90 times).
var parsedShapes sync.Map // string → ir.Shape

func parsedShape(shape string) (ir.Shape, error) {
	if v, ok := parsedShapes.Load(shape); ok {
		return v.(ir.Shape), nil
	}
	sh, err := ir.ParseShape(shape)
	if err != nil {
		return nil, err
	}
	parsedShapes.Store(shape, sh)
	return sh, nil
}

func axis(n *ir.Node, rank int) int {
	ax := int(n.Attrs.Int("axis", -1))
	if ax < 0 {
		ax += rank
	}
	return ax
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func stateName(n *ir.Node) string { return strings.TrimSpace(n.Attrs.Str("name", "")) }
