package backends

import (
	"github.com/ds4go/ds4/ir"
)

// Device is an opened backend: it owns its buffers (host memory, GPU
// memory), binds weights in the layout its kernels want, and prepares and
// runs the segments placed on it. A device is used by one goroutine at a
// time (the engine serialises the calls of a model).
type Device interface {
	// Describe names the device and the kernels it runs, for reports:
	// "host, AVX2+FMA kernels", "NVIDIA H200 (sm_90, 132 SMs), CUDA 13.0".
	Describe() string
	// Memory is the memory the device has free and in total, in bytes, so
	// the engine can refuse a session that does not fit before allocating.
	Memory() (free, total int64, err error)

	// BindWeight makes a device buffer of a checkpoint tensor, once per
	// model; the device chooses the layout (widen, keep as stored, tile,
	// transpose). The engine has checked the tensor's dtype, shape and
	// values (no NaN scale, no non-finite value) against the plan.
	BindWeight(w *HostWeight) (Buffer, error)
	// Alloc makes a zeroed buffer of the graph's dtype and shape (state,
	// caches).
	Alloc(dt ir.DType, shape []int) (Buffer, error)
	// Upload makes a buffer holding t's values (inputs, RoPE tables, a
	// teacher-forced probe value, a value crossing from another device). A
	// host device may keep t itself: the caller gives t up.
	Upload(t *Tensor) (Buffer, error)
	// Download returns b's values in host memory, after the queued work
	// that writes b has finished. A host device returns its tensor itself,
	// without a copy: the caller must not modify it.
	Download(b Buffer) (*Tensor, error)
	// Free releases a buffer made by this device (Close frees the rest).
	Free(b Buffer) error
	// NewArena makes the activation buffers of one graph for one session:
	// sizes[k] is the most each slot k (a node's buf attribute) holds.
	NewArena(sizes []SlotSize) (Arena, error)

	// Prepare turns a segment placed on this backend into a program, once
	// per model: it may fuse the segment's nodes, plan the launches and
	// capture them.
	Prepare(seg *Segment) (Program, error)
	// Sync waits for every launched program and reports the first error of
	// the queued work (a kernel's failure is returned here or by a later
	// Download, naming the op).
	Sync() error
	// Close frees every buffer, arena and program of the device.
	Close() error
}

// Program is a segment prepared for one device.
type Program interface {
	// Launch queues one call of the segment on the device and returns,
	// possibly before the work has run: env.Values must hold the buffers
	// of seg.In (on this device); Launch puts those of seg.Out there.
	// Errors found while queueing return here; later ones from Sync.
	Launch(env *Env) error
}

// Env is what one launch of a program reads and writes. The buffers in it
// belong to the program's device.
type Env struct {
	B, S, M  int // batch, tokens in this call, maximum length (the caches' size)
	StartPos int // absolute position of the first token

	Inputs map[string]Buffer // the graph's inputs by name ("tokens", "start_pos")
	// Weight returns the buffer BindWeight made for a weight node (the
	// same buffer on every call).
	Weight func(n *ir.Node) (Buffer, error)
	State  map[string]Buffer // persistent state by name, updated in place
	// Rope returns the RoPE table of a rope_table node (made once per
	// session by Upload, the engine computing its values).
	Rope  func(n *ir.Node) (Buffer, error)
	Arena Arena // the session's activation buffers for this graph, from NewArena (may be nil)

	// Values holds the values crossing segment boundaries on this device:
	// at least seg.In on entry; Launch adds seg.Out. (The Runner keeps one
	// Env per device for a call, so it may hold other segments' values.)
	Values map[*ir.Node]Buffer

	// Probe, when not nil, sees the value of every probe node of the
	// segment and returns the value to continue with: v itself, or a
	// teacher-forced replacement (force is the node's force attribute) the
	// callback made with Upload. It may Download v (which waits for it).
	// When nil, probes are views and nothing is read back.
	Probe func(name string, force bool, v Buffer) (Buffer, error)
	// OpTimes, when not nil, accumulates kernel wall time by op name (a
	// device that cannot time ops leaves it alone).
	OpTimes map[string]*OpTime
	// NodeTimes, when not nil, accumulates the same time by node (for a
	// breakdown by layer; a kernel that runs several nodes is charged to
	// the node that launches it: the last of a cuda fused run).
	NodeTimes map[*ir.Node]*OpTime
	// Chunk marks a call whose rows are positions of one prompt (a
	// prefill, or one chunk of a longer prompt): a kernel that picks its
	// code by the row count computes every row as a call of many rows
	// would (the cpu backend's packed GEMMs), so that a prompt prefilled
	// in chunks keeps the bits of one call, and the head on the last
	// position alone those of the head over every position.
	Chunk bool
	// Replay makes the call a bounded replay (passes.BoundedRows): its
	// rows are positions of one prompt ending Tail rows after the call's
	// last, and only the prompt's last logits and the caches are wanted,
	// so a node with the attribute rows = k is computed on its last
	// k − Tail rows only (at least one; the others hold whatever its
	// buffer held). Host devices apply it to calls of one row of the batch.
	Replay bool
	Tail   int
}

// Buffer is a value held by a device. Host devices use *Tensor; a GPU
// device its own type (device pointer, dtype, shape).
type Buffer interface {
	// Type is the buffer's dtype and shape.
	Type() (ir.DType, []int)
	// Bytes is the memory the buffer holds on its device.
	Bytes() int64
}

// Arena is a session's activation memory for one graph on one device.
type Arena interface {
	// Bytes is the memory the arena holds now.
	Bytes() int64
	// Close frees the arena's memory (after the work using it is done);
	// the session closes its arenas, Device.Close the remaining ones.
	Close() error
}

// HostWeight is a checkpoint tensor as stored, handed to BindWeight.
type HostWeight struct {
	Node   *ir.Node // the graph's weight node (attributes: name, format, experts, layer)
	Name   string   // the checkpoint tensor's name (an expert's own name in a stack)
	DType  ir.DType // the graph's dtype of the value
	Shape  []int    // the graph's shape of the value (fp4: logical, two codes a byte)
	Format string   // the node's format: bf16, f32, fp8, fp8row, fp4, i64
	// Stored is the checkpoint dtype of Data (safetensors spelling: BF16,
	// F16, F32, F8_E4M3, I8, U8, I64).
	Stored string
	// Data is the tensor's little-endian bytes, mapped from the checkpoint:
	// read-only, valid until the model closes (a device that keeps them
	// need not copy).
	Data []byte
	// Scale is the e8m0 block scales of fp8 (ceil(R/32)×ceil(C/32)), fp8row
	// (R×ceil(C/32)) and fp4 (R×C/32) weights, else nil.
	Scale []byte
	// Parts is an expert stack (the node's experts attribute): one weight
	// per expert, in expert order; Data and Scale are nil.
	Parts []*HostWeight
}

// Tensor is a value in host memory: the Buffer of host devices. Float
// activations of any float dtype live in F32 (bf16/f16 values are exactly
// representable there); integer values in I64/I32/U8. Quantised weights
// keep their stored bytes in U8 (e4m3 codes or packed e2m1 pairs) and their
// e8m0 scales in Scale; an expert stack keeps one tensor per expert in
// Parts, so only chosen experts are touched.
type Tensor struct {
	DType ir.DType
	Shape []int
	F32   []float32
	I64   []int64
	I32   []int32
	U8    []byte
	Scale []byte
	Parts []*Tensor
}

// ZeroTensor is a zeroed host tensor: floats in F32, i64 in I64, i32 in
// I32, the byte-sized dtypes in U8.
func ZeroTensor(dt ir.DType, shape []int) *Tensor {
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...)}
	n := t.NumElements()
	switch {
	case dt.IsFloat():
		t.F32 = make([]float32, n)
	case dt == ir.I64:
		t.I64 = make([]int64, n)
	case dt == ir.I32:
		t.I32 = make([]int32, n)
	default:
		t.U8 = make([]byte, n)
	}
	return t
}

// NumElements is the product of the shape.
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Type implements Buffer.
func (t *Tensor) Type() (ir.DType, []int) { return t.DType, t.Shape }

// Bytes implements Buffer: the memory t's slices hold (parts included).
func (t *Tensor) Bytes() int64 {
	if t == nil {
		return 0
	}
	n := int64(len(t.F32))*4 + int64(len(t.I64))*8 + int64(len(t.I32))*4 + int64(len(t.U8)) + int64(len(t.Scale))
	for _, p := range t.Parts {
		n += p.Bytes()
	}
	return n
}
