package backends

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/ds4go/ds4/ir"
)

// The backend contract (issue 12). A Backend is a registered kind of
// executor ("cpu", "cpu-ref", "cuda", ...). Opening it gives a Device: the
// place where its buffers live (host memory, GPU memory). The engine binds
// the weights once through the device (the device chooses their layout),
// asks it for the session state, the activation arena and the RoPE tables,
// has it Prepare each same-backend Segment of a graph into a Program, and
// launches the programs of a call one after the other: a launch only queues
// work, Sync waits for it. Values cross between devices only at segment
// boundaries (the transfers Schedule reports); probe values are read back
// only when a trace asks (Env.Probe).
//
// Host backends (buffers are *Tensor in this process's memory) get most of
// this from HostDevice (host.go); a GPU backend implements Device itself.

// Backend is one registered kind of executor.
type Backend interface {
	// Name is the registry name, e.g. "cpu".
	Name() string
	// Available says why the backend cannot run on this machine (nil: it
	// can), in words for `exec -list-backends`: "libcuda.so.1 not found".
	Available() error
	// Capabilities is what the backend runs, as data; the scheduler places
	// everything else on the fallback chain.
	Capabilities() Capabilities
	// Open starts a device (a context on the first GPU, the host). Every
	// buffer and program it makes dies with Device.Close.
	Open() (Device, error)
}

// Capabilities says which nodes a backend runs: the ops of the table, each
// with the dtypes its operands and result may have, and where the rest goes.
type Capabilities struct {
	// Ops maps an op name to the dtypes it takes: every operand and the
	// result must be one of them; an empty list takes any dtype.
	Ops map[string][]ir.DType
	// Accept, when set, refines the table per node (a shape or attribute
	// the backend cannot do); it sees only nodes the table admits.
	Accept func(n *ir.Node) bool
	// Fallback names the backend that runs what this one does not ("" for
	// none: then the graph must fit entirely). The chain of fallbacks ends
	// at a backend that runs every op (cpu-ref).
	Fallback string
	// Host is true when the backend's buffers are *Tensor in host memory:
	// a value crossing between two host backends is handed over, not copied.
	Host bool
}

// Supports reports whether the table (and Accept) admits node n.
func (c Capabilities) Supports(n *ir.Node) bool {
	dts, ok := c.Ops[n.Op]
	if !ok {
		return false
	}
	if len(dts) > 0 {
		if !slices.Contains(dts, n.Type.DType) {
			return false
		}
		for _, a := range n.Args {
			if !slices.Contains(dts, a.Type.DType) {
				return false
			}
		}
	}
	return c.Accept == nil || c.Accept(n)
}

// AllOps is a capability table of every op of the IR table with any dtype.
func AllOps() map[string][]ir.DType {
	m := map[string][]ir.DType{}
	for op := range ir.Ops {
		m[op] = nil
	}
	return m
}

// KernelPanic is a panic inside a kernel, recovered by a program: a bug of
// the backend, not bad input.
type KernelPanic struct {
	Node  string // "%12 (matmul)"
	Value any
}

func (e *KernelPanic) Error() string {
	return fmt.Sprintf("internal error in %s: %v; please report it", e.Node, e.Value)
}

// OpTime is the wall time spent in the kernels of one op and their count.
type OpTime struct {
	Calls int
	Nanos int64
}

// add counts one call of d nanoseconds (t nil: the first).
func (t *OpTime) add(d int64) *OpTime {
	if t == nil {
		t = &OpTime{}
	}
	t.Calls++
	t.Nanos += d
	return t
}

var (
	mu       sync.Mutex
	registry = map[string]Backend{}
)

// Register makes a backend available by name, from an init function (like
// database/sql drivers). It panics on duplicates.
func Register(b Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[b.Name()]; dup {
		panic("backends: duplicate backend " + b.Name())
	}
	registry[b.Name()] = b
}

// Get returns a registered backend (available or not: ask Available).
func Get(name string) (Backend, error) {
	mu.Lock()
	defer mu.Unlock()
	if b, ok := registry[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("backend %q is not available (have: %v)", name, namesLocked())
}

// Names lists the registered backends, sorted.
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
