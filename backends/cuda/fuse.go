package cuda

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// Fusion is backend-local lowering: at prepare time planFusions finds runs
// of a segment's nodes that one fused kernel computes (fused.cuh) and the
// program gives each node of a run a wrapper step. In a call without a
// probe callback, a run's nodes only note their arguments and, for the
// values read outside the run, take their output buffer at their own
// step (the plan's slot at that point of the graph); the last node of the
// run launches the fused kernel, which writes those buffers. Values read
// only inside the run are never made. With a probe callback (a trace, a
// teacher-forced value) every node runs its own launcher, as unfused.
//
// A run is fused only when (checked here, from the graph):
//   - its inner values are read by no node outside the run and are not
//     outputs of the segment;
//   - the nodes between its first and last that are not in it queue no
//     work (weights, constants, views), so nothing reads a run's output
//     before the fused kernel has written it;
//   - no value of the plan's slots that the run reads is overwritten
//     before the last node (a slot reused after its original reader).
//
// The fused kernels keep the unfused kernels' arithmetic in the same
// order: the results are bit-identical (fuse_test.go).

// fusion is one planned run.
type fusion struct {
	kind  string
	nodes []int        // run positions in the segment, ascending
	inner []int        // run positions whose values are never made (read only by the run)
	outs  map[int]bool // the other positions: their values are made (buffers the kernel writes)
	// moved are outputs whose plan slot holds one of the run's inputs until
	// an earlier run node (the slot is reused after that reader): they get
	// a buffer of their own, and calls of more than maxMovedRows rows run
	// unfused (that buffer would be a prefill's activation).
	moved map[int]bool
	// alias reports whether node k's output may share the buffer of input
	// a of node i (the kernel reads each row of a before writing row k).
	alias func(i int, a *ir.Node, k int) bool
	// when, if set, says whether a call runs fused (false: every node runs
	// its own launcher); the same for all of a call's nodes.
	when func(c *call) bool
	role map[string]int
	last int
	orig map[int]opFunc
	run  func(c *call, f *fusion, st *runState) error

	mu    sync.Mutex
	calls map[*call]*runState
	spare *runState // the last finished call's state, reused by the next
}

// runState is what a run's nodes left for its last one in one call.
type runState struct {
	args map[int][]*Value
	vals map[int]*Value
}

// fuse replaces the steps of the runs planFusions finds; the fused kernels
// must be in the loaded module (an image built before them leaves the
// program unfused). Option cuda-fusions=false turns fusion off; a value
// that is not a boolean is an error (the option is read, so exec's check
// for unread options would not catch it).
func (p *Program) fuse() error {
	on, err := backends.BoolOption("cuda-fusions", true)
	if err != nil {
		return err
	}
	if !on || !p.gpu.k.bindFused() {
		return nil
	}
	runs := planFusions(p.seg)
	for _, f := range runs {
		fusedRuns.Add(1)
		f.orig = map[int]opFunc{}
		for _, i := range f.nodes {
			f.orig[i] = p.steps[i]
			p.steps[i] = f.step
		}
	}
	for _, i := range planCastViews(p.seg, runs) {
		p.steps[i] = castView(p.steps[i])
	}
	return nil
}

// castView is a cast of bf16 values to f32 as a view of its argument's
// buffer (activations hold fp32 already: the cast copies them unchanged);
// a weight, or a call with a probe callback, runs the copy.
func castView(orig opFunc) opFunc {
	return func(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
		if c.env.Probe != nil || a[0].W != nil || a[0].DType != ir.BF16 {
			return orig(c, i, n, a)
		}
		v := *a[0]
		v.DType = ir.F32
		v.Shape = clone(a[0].Shape)
		return &v, nil
	}
}

// planCastViews returns the casts bf16 → f32 that may be views: the
// argument's plan slot is written by no node from the cast to the last
// reader of its value (through views; a reader in a fused run reads at the
// run's last node), no node that writes in place (no slot, not quiet)
// reads the argument in that span, and the value is not a segment output.
func planCastViews(seg *backends.Segment, runs []*fusion) []int {
	g := newGraphInfo(seg)
	at := map[int]int{} // run position → the run's last position
	inRun := map[int]bool{}
	for _, f := range runs {
		for _, i := range f.nodes {
			at[i], inRun[i] = f.last, true
		}
	}
	var out []int
	for i, n := range seg.Nodes {
		if n.Op != "cast" || inRun[i] || n.Type.DType != ir.F32 || n.Args[0].Type.DType != ir.BF16 || n.Attrs.Str("to", "") != "f32" {
			continue
		}
		src := root(n.Args[0])
		s := slotOf(src)
		if s < 0 || src.Op == "weight" {
			continue
		}
		end, ok := g.lastRead(n, at)
		if !ok || slices.ContainsFunc(g.readsVia(n), func(r int) bool { return slotOf(g.nodes[r]) < 0 }) {
			continue // read by a node that may write in place (or own its buffer)
		}
		safe := true
		for k := i + 1; k <= end && safe; k++ {
			m := g.nodes[k]
			if slotOf(m) == s {
				safe = false
			}
			if slotOf(m) < 0 && !quiet[m.Op] && slices.ContainsFunc(m.Args, func(a *ir.Node) bool { return root(a) == src }) {
				safe = false
			}
		}
		if safe {
			out = append(out, i)
		}
	}
	return out
}

// lastRead is the last position at which n's value is read (through
// views), a reader in a fused run counted at the run's last node; false
// if the value leaves the segment.
func (g *graphInfo) lastRead(n *ir.Node, at map[int]int) (int, bool) {
	if g.escapes[n] {
		return 0, false
	}
	end := g.pos[n]
	for _, r := range g.readers[n] {
		m := g.nodes[r]
		if view[m.Op] {
			e, ok := g.lastRead(m, at)
			if !ok {
				return 0, false
			}
			end = max(end, e)
			continue
		}
		if l, ok := at[r]; ok {
			r = max(r, l)
		}
		end = max(end, r)
	}
	return end, true
}

// fusedKernels are the kernels of fused.cuh, looked up when a program is
// prepared (not at LoadKernels, so an older image still loads).
var fusedKernels = []string{"hc_mix_split", "pre_norm_quant", "gate_tail"}

var fusedMu sync.Mutex

// fusedRuns counts the runs programs were given (tests read it).
var fusedRuns atomic.Int64

// bindFused adds the fused kernels to k.fn; false if the image lacks one.
func (k *Kernels) bindFused() bool {
	fusedMu.Lock()
	defer fusedMu.Unlock()
	for _, name := range fusedKernels {
		if _, ok := k.fn[name]; ok {
			continue
		}
		f, err := k.mod.Function(name)
		if err != nil {
			return false
		}
		k.fn[name] = f
	}
	// optional: hc_mix_split_wide, with its shared memory limit raised
	if _, ok := k.fn["hc_mix_split_wide"]; !ok {
		if f, err := k.mod.Function("hc_mix_split_wide"); err == nil && k.mod.SetMaxDynamicShared(f, hcWideShared) == nil {
			k.fn["hc_mix_split_wide"] = f
		}
	}
	return true
}

// maxMovedRows is the most rows (tokens) a call may have for a run with
// moved outputs to be fused.
const maxMovedRows = 64

// step is the wrapper of every node of the run.
func (f *fusion) step(c *call, i int, n *ir.Node, a []*Value) (*Value, error) {
	if c.env.Probe != nil || (len(f.moved) > 0 && c.B*c.S > maxMovedRows) || (f.when != nil && !f.when(c)) {
		return f.orig[i](c, i, n, a)
	}
	st := f.state(c)
	st.args[i] = append(st.args[i][:0], a...) // a is the executor's, reused for the next node
	var v *Value
	if f.outs[i] {
		dims, err := c.bindings().Dims(n.Type.Shape)
		if err != nil {
			return nil, err
		}
		shape := make([]int, len(dims))
		for k, d := range dims {
			shape[k] = int(d)
		}
		if f.moved[i] {
			v = &Value{DType: n.Type.DType, Shape: shape}
			if v.Ptr, err = c.scratch(i, 0, v.Bytes()); err != nil {
				return nil, err
			}
		} else if v, err = c.out(i, n.Type.DType, shape); err != nil {
			return nil, err
		}
		st.vals[i] = v
	}
	if i != f.last {
		return v, nil
	}
	f.mu.Lock()
	delete(f.calls, c)
	f.mu.Unlock()
	err := f.run(c, f, st)
	// every node of the run sets its entries at each call, so the next
	// call may take this state as it is (its maps and argument slices)
	f.mu.Lock()
	f.spare = st
	f.mu.Unlock()
	return v, err
}

func (f *fusion) state(c *call) *runState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[*call]*runState{}
	}
	st := f.calls[c]
	if st == nil {
		if st, f.spare = f.spare, nil; st == nil {
			st = &runState{args: make(map[int][]*Value, len(f.nodes)), vals: make(map[int]*Value, len(f.nodes))}
		}
		f.calls[c] = st
	}
	return st
}

// ---- planning -------------------------------------------------------------------

// graphInfo is what the planner knows of a segment.
type graphInfo struct {
	nodes   []*ir.Node
	pos     map[*ir.Node]int
	readers map[*ir.Node][]int // positions of the nodes that read a value
	escapes map[*ir.Node]bool  // outputs of the segment
}

func newGraphInfo(seg *backends.Segment) *graphInfo {
	g := &graphInfo{nodes: seg.Nodes, pos: map[*ir.Node]int{}, readers: map[*ir.Node][]int{}, escapes: map[*ir.Node]bool{}}
	for i, n := range seg.Nodes {
		g.pos[n] = i
		for _, a := range n.Args {
			g.readers[a] = append(g.readers[a], i)
		}
	}
	for _, n := range seg.Out {
		g.escapes[n] = true
	}
	return g
}

// quiet are the ops whose launchers queue no work (with no probe callback).
var quiet = map[string]bool{"weight": true, "const": true, "input": true, "state": true, "rope_table": true, "reshape": true, "probe": true}

// view are the ops whose value is their argument's buffer.
var view = map[string]bool{"reshape": true, "probe": true}

// root is the node whose buffer n's value is (through views).
func root(n *ir.Node) *ir.Node {
	for view[n.Op] && len(n.Args) == 1 {
		n = n.Args[0]
	}
	return n
}

func slotOf(n *ir.Node) int64 {
	if s, ok := n.Attrs["buf"].(int64); ok {
		return s
	}
	return -1
}

// readsVia returns the nodes reading n's value directly or through views,
// and whether every view on the way has only such readers.
func (g *graphInfo) readsVia(n *ir.Node) []int {
	var out []int
	for _, r := range g.readers[n] {
		if m := g.nodes[r]; view[m.Op] {
			out = append(out, g.readsVia(m)...)
			continue
		}
		out = append(out, r)
	}
	return out
}

// check completes f (last, outs, moved) and reports whether the run may be
// fused.
func (g *graphInfo) check(f *fusion) bool {
	slices.Sort(f.nodes)
	in := map[int]bool{}
	for _, i := range f.nodes {
		in[i] = true
	}
	first := f.nodes[0]
	f.last = f.nodes[len(f.nodes)-1]
	f.outs = map[int]bool{}
	for _, i := range f.nodes {
		f.outs[i] = !slices.Contains(f.inner, i)
	}
	for _, i := range f.inner { // read only by the run
		n := g.nodes[i]
		if g.escapes[n] {
			return false
		}
		for _, r := range g.readers[n] {
			if !in[r] {
				return false
			}
		}
	}
	f.moved = map[int]bool{}
	for k := first + 1; k < f.last; k++ {
		if !in[k] && !quiet[g.nodes[k].Op] {
			return false
		}
	}
	for _, i := range f.nodes { // the run's inputs survive until its last node
		for _, a := range g.nodes[i].Args {
			if j, ok := g.pos[root(a)]; ok && in[j] { // a run value (or a view of one)
				continue
			}
			s := slotOf(root(a))
			if s < 0 {
				continue
			}
			for k := i + 1; k <= f.last; k++ {
				if !f.outs[k] || slotOf(g.nodes[k]) != s || g.nodes[k] == root(a) {
					continue // inner and in-between nodes write nothing
				}
				if f.alias == nil || !f.alias(i, a, k) {
					f.moved[k] = true
				}
			}
		}
	}
	return true
}
