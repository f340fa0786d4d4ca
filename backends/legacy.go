package backends

import (
	"fmt"
	"sort"
	"sync"

	"github.com/ds4go/ds4/ir"
)

// OldEnv is (the pre-issue-12 contract, going away) what one call of a compiled graph reads and writes.
type OldEnv struct {
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
	Arena *HostArena
	// Rope computes a RoPE table for a rope_table node.
	Rope func(n *ir.Node, maxLen int) (*Tensor, error)
	// OpTimes, when not nil, accumulates the wall time of each node's
	// kernel by op name (exec -bench -op-times).
	OpTimes map[string]*OpTime
}

// OldProgram is a graph prepared for one backend.
type OldProgram interface {
	Run(env *OldEnv) error
}

// KernelFunc computes one node from its argument values.
type KernelFunc func(env *OldEnv, n *ir.Node, args []*Tensor) (*Tensor, error)

// OldBackend provides kernels for the ops it supports. The scheduler
// (Schedule) runs every other op on the fallback backend, the CPU.
type OldBackend interface {
	Name() string
	// Supports reports whether the backend can run node n (its op, dtypes
	// and attributes).
	Supports(n *ir.Node) bool
	// Kernel returns the kernel for a supported node.
	Kernel(n *ir.Node) (KernelFunc, error)
}

var (
	oldMu       sync.Mutex
	oldRegistry = map[string]OldBackend{}
)

// RegisterOld makes a backend available by name. It panics on duplicates.
func RegisterOld(b OldBackend) {
	oldMu.Lock()
	defer oldMu.Unlock()
	if _, dup := oldRegistry[b.Name()]; dup {
		panic("backends: duplicate backend " + b.Name())
	}
	oldRegistry[b.Name()] = b
}

// GetOld returns a registered backend.
func GetOld(name string) (OldBackend, error) {
	oldMu.Lock()
	defer oldMu.Unlock()
	if b, ok := oldRegistry[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("backend %q is not available (have: %v)", name, oldNamesLocked())
}

// NamesOld lists the registered backends.
func NamesOld() []string {
	oldMu.Lock()
	defer oldMu.Unlock()
	return oldNamesLocked()
}

func oldNamesLocked() []string {
	var ns []string
	for n := range oldRegistry {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
