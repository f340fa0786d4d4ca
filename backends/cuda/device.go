package cuda

import (
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

// GPU is one opened GPU: its context, the stream every launch and copy of
// the backend goes to (so the ops of a step follow each other on the device
// without the host waiting), the loaded kernels, and every allocation made
// through it, so that Close frees what a model or session left.
type GPU struct {
	ctx *driver.Context
	st  *driver.Stream
	k   *Kernels

	mu     sync.Mutex
	allocs map[driver.Ptr]allocation
	used   int64 // bytes allocated now

	hostBufs     map[*driver.HostBuffer]bool // Engram tables in host memory
	programs     []*Program
	pending      []*Program // launched since the last Sync, with error flags
	scratchArena *Arena     // for launches without an arena

	graphs   bool            // decode calls replayed from CUDA graphs (option cuda-graphs)
	tapes    []*driver.Tape  // the recordings of the call being launched, by chunk (Program.Launch)
	events   []*driver.Event // per-op timing (Env.OpTimes), reused
	timeline timeline        // DS4_CUDA_TIMELINE (timeline.go)
}

type allocation struct {
	bytes int64
	what  string
}

// OpenGPU opens GPU 0 and loads the kernels (image nil: the embedded fatbin).
func OpenGPU(image []byte) (*GPU, error) {
	if err := driver.Probe(); err != nil {
		return nil, err
	}
	c, err := driver.Open(0)
	if err != nil {
		return nil, err
	}
	st, err := c.NewStream()
	if err != nil {
		c.Close()
		return nil, err
	}
	k, err := LoadKernels(c, image)
	if err != nil {
		st.Destroy()
		c.Close()
		return nil, err
	}
	on, err := graphsOption()
	if err == nil {
		k.Exact, err = backends.BoolOption("cuda-exact", false)
	}
	if err == nil {
		k.WGMMA, err = backends.BoolOption("cuda-wgmma", false)
	}
	if err == nil {
		err = pdlOption(st, k)
	}
	if err != nil {
		k.Close()
		st.Destroy()
		c.Close()
		return nil, err
	}
	return &GPU{ctx: c, st: st, k: k, allocs: map[driver.Ptr]allocation{}, hostBufs: map[*driver.HostBuffer]bool{}, graphs: on}, nil
}

// graphsOption reads whether decode calls use CUDA graphs: the backend
// option cuda-graphs (default true); DS4_CUDA_GRAPHS=0 turns them off too.
func graphsOption() (bool, error) {
	on, err := backends.BoolOption("cuda-graphs", true)
	if err != nil {
		return false, err
	}
	if os.Getenv("DS4_CUDA_GRAPHS") == "0" {
		on = false
	}
	return on && driver.GraphsSupported(), nil
}

// pdlOption turns programmatic dependent launch on for st when the image's
// kernels all wait for their predecessors first (it has pdl_ready) and the
// backend option cuda-pdl (default true) allows it; DS4_CUDA_PDL=0 turns
// it off too. Each kernel then launches while the one before it finishes.
func pdlOption(st *driver.Stream, k *Kernels) error {
	on, err := backends.BoolOption("cuda-pdl", true)
	if err != nil {
		return err
	}
	if os.Getenv("DS4_CUDA_PDL") == "0" {
		on = false
	}
	if _, err := k.mod.Function("pdl_ready"); err != nil {
		on = false
	}
	st.SetProgrammaticLaunch(on)
	return nil
}

// Used is the memory allocated through g now.
func (g *GPU) Used() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// alloc allocates bytes (at least 1, so every buffer has an address) for what.
func (g *GPU) alloc(bytes int64, what string) (driver.Ptr, error) {
	p, err := g.ctx.Alloc(int(max(bytes, 1)), what)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.allocs[p] = allocation{bytes: max(bytes, 1), what: what}
	g.used += max(bytes, 1)
	g.mu.Unlock()
	return p, nil
}

// free frees one allocation of alloc (0 is ignored).
func (g *GPU) free(p driver.Ptr) error {
	if p == 0 {
		return nil
	}
	g.mu.Lock()
	a, ok := g.allocs[p]
	delete(g.allocs, p)
	g.used -= a.bytes
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: freeing %#x, which is not a live allocation", uint64(p))
	}
	return g.ctx.Free(p, a.what)
}

// tapeFor is the tape chunk k of a call records into.
func (g *GPU) tapeFor(k int) *driver.Tape {
	for len(g.tapes) <= k {
		g.tapes = append(g.tapes, &driver.Tape{})
	}
	return g.tapes[k]
}

// Close waits for the stream, frees every allocation still live, unloads
// the kernels and releases the context.
func (g *GPU) Close() error {
	err := g.st.Sync("closing the GPU")
	for _, p := range g.programs {
		p.releaseGraphs()
		for _, n := range p.seg.Nodes {
			whatNames.Delete(n)
		}
	}
	for _, e := range g.events {
		e.Destroy()
	}
	g.events = nil
	g.timeline.close()
	for _, t := range g.tapes {
		if e := t.Free(g.ctx); e != nil && err == nil {
			err = e
		}
	}
	g.mu.Lock()
	ptrs := make([]driver.Ptr, 0, len(g.allocs))
	for p := range g.allocs {
		ptrs = append(ptrs, p)
	}
	g.mu.Unlock()
	sort.Slice(ptrs, func(i, j int) bool { return ptrs[i] < ptrs[j] })
	for _, p := range ptrs {
		if e := g.free(p); e != nil && err == nil {
			err = e
		}
	}
	for hb := range g.hostBufs {
		if e := hb.Free(); e != nil && err == nil {
			err = e
		}
	}
	g.hostBufs = nil
	for _, e := range []error{g.k.Close(), g.st.Destroy(), g.ctx.Close()} {
		if e != nil && err == nil {
			err = e
		}
	}
	return err
}

// elemBytes is the device storage of one element of dtype dt: every float
// activation is fp32 holding a value of its dtype (as the reference keeps
// them), ids and positions int64, attention indices int32, masks bytes.
func elemBytes(dt ir.DType) int64 {
	switch dt {
	case ir.I64:
		return 8
	case ir.U8, ir.Bool, ir.I8:
		return 1
	}
	return 4
}

// Value is a tensor on the GPU. Activations, state and constants are
// contiguous row-major buffers of elemBytes; weights carry their layout
// (Layout).
type Value struct {
	DType ir.DType
	Shape []int
	Ptr   driver.Ptr
	// Host holds the values of a small integer constant (const nodes, the
	// token map applied to one): read on the host where a kernel takes the
	// value as an argument (engram_hash's pad id), never downloaded.
	Host []int64
	W    *Layout // weights only

	// the memo's hash of Host (hostKey), for the slice at hashOf of hashN
	hashOf *int64
	hashN  int
	hash   uint64
}

// Numel is the number of elements.
func (v *Value) Numel() int { return numel(v.Shape) }

func last(v *Value) int { return v.Shape[len(v.Shape)-1] }

func rows(v *Value) int { return v.Numel() / max(last(v), 1) }
