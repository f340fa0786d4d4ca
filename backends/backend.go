package backends

import (
	"fmt"
	"sort"
	"sync"

	"github.com/ds4go/ds4/ir"
)

// Tensor is a run-time value. Float activations of any float dtype live in
// F32 (bf16/f16 values are exactly representable there); integer values in
// I64/I32/U8. Quantised weights keep their stored bytes in U8 (e4m3 codes or
// packed e2m1 pairs) and their e8m0 scales in Scale; an expert stack keeps one
// tensor per expert in Parts, so only chosen experts are touched.
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

// NumElements is the product of the shape.
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Env is what one call of a compiled graph reads and writes.
type Env struct {
	B, S, M  int                // batch, tokens in this call, maximum length
	StartPos int                // absolute position of the first token
	Inputs   map[string]*Tensor // by input name
	Weight   func(n *ir.Node) (*Tensor, error)
	State    map[string]*Tensor // persistent state by name, updated in place
	Outputs  map[string]*Tensor // filled by Run
	// Probe sees every probe value; it returns the value to continue with
	// (a teacher-forced replacement when force is set), or t itself.
	Probe func(name string, force bool, t *Tensor) (*Tensor, error)
	// Arena holds the activation buffers of the graph's slots (may be nil).
	Arena *Arena
	// Rope computes a RoPE table for a rope_table node.
	Rope func(n *ir.Node, maxLen int) (*Tensor, error)
	// OpTimes, when not nil, accumulates the wall time of each node's
	// kernel by op name (exec -bench -op-times).
	OpTimes map[string]*OpTime
}

// OpTime is the wall time spent in the kernels of one op and their count.
type OpTime struct {
	Calls int
	Nanos int64
}

// Program is a graph prepared for one backend.
type Program interface {
	Run(env *Env) error
}

// KernelFunc computes one node from its argument values.
type KernelFunc func(env *Env, n *ir.Node, args []*Tensor) (*Tensor, error)

// Backend provides kernels for the ops it supports. The scheduler
// (Schedule) runs every other op on the fallback backend, the CPU.
type Backend interface {
	Name() string
	// Supports reports whether the backend can run node n (its op, dtypes
	// and attributes).
	Supports(n *ir.Node) bool
	// Kernel returns the kernel for a supported node.
	Kernel(n *ir.Node) (KernelFunc, error)
}

var (
	mu       sync.Mutex
	registry = map[string]Backend{}
)

// Register makes a backend available by name. It panics on duplicates.
func Register(b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[b.Name()]; dup {
		panic("backends: duplicate backend " + b.Name())
	}
	registry[b.Name()] = b
}

// Get returns a registered backend.
func Get(name string) (Backend, error) {
	mu.Lock()
	defer mu.Unlock()
	if b, ok := registry[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("backend %q is not available (have: %v)", name, namesLocked())
}

// Names lists the registered backends.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	var ns []string
	for n := range registry {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
