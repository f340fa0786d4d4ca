package cuda

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// Program is a segment prepared for the GPU: one launcher per node, queued
// in graph order on the GPU's stream. Nothing is read back between the
// ops of a call: host values a kernel needs (positions, window indices,
// visible lengths) follow from the call's start position and are uploaded,
// expert ids and attention indices stay on the GPU, and the host waits only
// to read the outputs (logits), a requested probe, and the call's error
// flags (a token id out of range) at Sync.
type Program struct {
	gpu    *GPU
	seg    *backends.Segment
	steps  []opFunc
	args   [][]int          // argument positions in the segment, -1: from env.Values
	index  map[*ir.Node]int // node → position in the segment
	flag   map[int]int      // node → its error flag (embed, token_map)
	consts map[int]*Value   // const nodes, uploaded once
	tables map[int]EngramTables
	flags  driver.Ptr // int32 per flag, zeroed at each launch
	owned  []driver.Ptr
	// graphs are the captured decode calls, one cache per chunk of
	// graphChunkNodes nodes (Launch); graphsOn: graphs are on
	graphs   []*driver.Graphs
	graphsOn bool
	memoOK   []bool // nodes that may be memoised (memo.go); nil: none
	memo     []nodeMemo
	shapes   []ir.Shape // reshape targets (attribute shape), parsed at prepare, by node position
}

// opFunc enqueues node i's kernels.
type opFunc func(c *call, i int, n *ir.Node, a []*Value) (*Value, error)

// Supports reports whether the GPU backend runs node n: its op, its dtypes
// and the attributes its kernels take. f16 values are not supported (no
// kernel rounds to f16).
func Supports(n *ir.Node) bool {
	if _, ok := ops[n.Op]; !ok {
		return false
	}
	if n.Type.DType == ir.F16 {
		return false
	}
	for _, a := range n.Args {
		if a.Type.DType == ir.F16 {
			return false
		}
	}
	switch n.Op {
	case "cast":
		to, err := ir.ParseDType(n.Attrs.Str("to", ""))
		return err == nil && (to == ir.F32 || to == ir.BF16) && n.Args[0].Type.DType.IsFloat()
	case "rmsnorm":
		return n.Type.DType == ir.BF16 // the kernel rounds to bf16
	}
	return supportsNode(n)
}

// prepare builds the program of a segment: every node must be supported
// (the scheduler cuts segments by Supports). Constants and the Engram hash
// tables go to the GPU now, and reshape targets are parsed once.
func (gpu *GPU) prepare(seg *backends.Segment) (*Program, error) {
	p := &Program{gpu: gpu, seg: seg, steps: make([]opFunc, len(seg.Nodes)), args: make([][]int, len(seg.Nodes)),
		shapes: make([]ir.Shape, len(seg.Nodes)), index: map[*ir.Node]int{}, flag: map[int]int{}, consts: map[int]*Value{}, tables: map[int]EngramTables{}}
	for i, n := range seg.Nodes {
		if !Supports(n) {
			p.Close()
			return nil, fmt.Errorf("cuda: %%%d (%s %s) is not supported on the GPU", n.ID, n.Op, n.Type)
		}
		p.steps[i] = ops[n.Op]
		for _, a := range n.Args {
			j, ok := p.index[a]
			if !ok {
				j = -1
			}
			p.args[i] = append(p.args[i], j)
		}
		p.index[n] = i
		var err error
		switch n.Op {
		case "embed", "token_map":
			p.flag[i] = len(p.flag)
		case "const":
			err = p.uploadConst(i, n)
		case "engram_hash":
			err = p.uploadTables(i, n)
		case "reshape":
			if p.shapes[i], err = ir.ParseShape(n.Attrs.Str("shape", "")); err != nil {
				err = fmt.Errorf("%s: shape: %v", what(n), err)
			}
		}
		if err != nil {
			p.Close()
			return nil, err
		}
	}
	if err := p.fuse(); err != nil { // fuse.go: runs of nodes that one fused kernel computes
		p.Close()
		return nil, err
	}
	var err error
	if p.flags, err = gpu.alloc(int64(4*max(len(p.flag), 1)), "error flags"); err != nil {
		p.Close()
		return nil, err
	}
	p.owned = append(p.owned, p.flags)
	if gpu.graphs {
		p.graphsOn = true
		if p.memoOK = p.memoable(); p.memoOK != nil {
			p.memo = make([]nodeMemo, len(seg.Nodes))
		}
	}
	return p, nil
}

func (p *Program) keep(bytes []byte, what string) (driver.Ptr, error) {
	d, err := p.gpu.alloc(int64(len(bytes)), what)
	if err != nil {
		return 0, err
	}
	p.owned = append(p.owned, d)
	return d, p.gpu.st.Upload(d, bytes, what)
}

func (p *Program) uploadConst(i int, n *ir.Node) error {
	shape := make([]int, len(n.Type.Shape))
	for k, d := range n.Type.Shape {
		shape[k] = int(d.N)
	}
	v := &Value{DType: n.Type.DType, Shape: shape}
	var data []byte
	if n.Type.DType.IsFloat() {
		f := make([]float32, numel(shape))
		for k, x := range n.Attrs.Floats("floats") {
			if k < len(f) {
				f[k] = float32(x)
			}
		}
		data = asBytes(f)
	} else if n.Type.DType == ir.I64 {
		v.Host = make([]int64, numel(shape))
		copy(v.Host, n.Attrs.Ints("ints"))
		data = asBytes(v.Host)
	} else {
		return fmt.Errorf("cuda: %%%d const of dtype %s", n.ID, n.Type.DType)
	}
	var err error
	v.Ptr, err = p.keep(data, fmt.Sprintf("const %%%d", n.ID))
	p.consts[i] = v
	return err
}

// uploadTables puts engram_hash's constants (multipliers, primes, offsets:
// the node's attributes) on the GPU.
func (p *Program) uploadTables(i int, n *ir.Node) error {
	mult, primes, offs := n.Attrs.Ints("multipliers"), n.Attrs.Ints("primes"), n.Attrs.Ints("offsets")
	heads := int(n.Attrs.Int("heads", 1))
	tb := EngramTables{Layers: 1, Ngram: len(mult), Heads: heads}
	if heads <= 0 || len(primes) != (len(mult)-1)*heads || len(offs) != len(primes) {
		return fmt.Errorf("cuda: %%%d engram_hash: %d multipliers, %d primes, %d offsets for %d heads", n.ID, len(mult), len(primes), len(offs), heads)
	}
	var err error
	what := fmt.Sprintf("engram_hash %%%d tables", n.ID)
	if tb.Mult, err = p.keep(asBytes(mult), what); err != nil {
		return err
	}
	if tb.Primes, err = p.keep(asBytes(primes), what); err != nil {
		return err
	}
	if tb.Offsets, err = p.keep(asBytes(offs), what); err != nil {
		return err
	}
	p.tables[i] = tb
	return nil
}

// Close frees the program's constants and graphs.
func (p *Program) Close() error {
	p.releaseGraphs()
	for _, n := range p.seg.Nodes {
		whatNames.Delete(n)
	}
	var err error
	for _, d := range p.owned {
		if e := p.gpu.free(d); e != nil && err == nil {
			err = e
		}
	}
	p.owned = nil
	return err
}

// ---- the activation arena ----------------------------------------------------

// Arena is one session's activation memory for one graph on the GPU: a
// buffer per plan slot (sized from the engine's SlotSize, the largest value
// the plan puts there in the session), and, made at their first use, the
// buffers of the values without a slot (the logits, a teacher-forced probe)
// and the launchers' scratch (a position per RoPE row, Sinkhorn's three
// parts, visible lengths).
type Arena struct {
	gpu     *GPU
	gen     int64 // buffers (re)allocated so far (node memos depend on them)
	slots   []*buffer
	own     map[*ir.Node]*buffer
	scratch map[*ir.Node][]*buffer
}

type buffer struct {
	p     driver.Ptr
	bytes int64
	what  string
}

// slotBytes is the device size of a slot: its values are fp32, int64 or
// int32 (or bytes, within the fp32 size of the same elements).
func slotBytes(s backends.SlotSize) int64 {
	return max(int64(s.F32)*4, int64(s.I64)*8, int64(s.I32)*4)
}

// ArenaBytes is what NewArena allocates for sizes, before it allocates.
func ArenaBytes(sizes []backends.SlotSize) int64 {
	var n int64
	for _, s := range sizes {
		n += max(slotBytes(s), 1)
	}
	return n
}

func (g *GPU) newArena(sizes []backends.SlotSize) (*Arena, error) {
	need := ArenaBytes(sizes)
	if err := g.fits(need, "the activation arena"); err != nil {
		return nil, err
	}
	a := &Arena{gpu: g, own: map[*ir.Node]*buffer{}, scratch: map[*ir.Node][]*buffer{}}
	for k, s := range sizes {
		b := &buffer{bytes: slotBytes(s), what: fmt.Sprintf("arena slot %d", k)}
		var err error
		if b.p, err = g.alloc(b.bytes, b.what); err != nil {
			a.free()
			return nil, err
		}
		a.slots = append(a.slots, b)
	}
	return a, nil
}

// Bytes implements backends.Arena.
func (a *Arena) Bytes() int64 {
	var n int64
	for _, b := range a.slots {
		n += b.bytes
	}
	for _, b := range a.own {
		n += b.bytes
	}
	for _, s := range a.scratch {
		for _, b := range s {
			n += b.bytes
		}
	}
	return n
}

// Close frees the arena's buffers now (a session that ends before its
// model); the device's Close frees them otherwise.
func (a *Arena) Close() error {
	if err := a.gpu.st.Sync("freeing an arena"); err != nil {
		return err
	}
	return a.free()
}

func (a *Arena) free() error {
	var err error
	put := func(b *buffer) {
		if e := a.gpu.free(b.p); e != nil && err == nil {
			err = e
		}
	}
	for _, b := range a.slots {
		put(b)
	}
	for _, b := range a.own {
		put(b)
	}
	for _, s := range a.scratch {
		for _, b := range s {
			put(b)
		}
	}
	a.slots, a.own, a.scratch = nil, map[*ir.Node]*buffer{}, map[*ir.Node][]*buffer{}
	a.gen++
	return err
}

// hold makes b hold bytes: a call larger than the session was sized for
// (or a first use). The stream is drained first, as queued launches may
// still read b.
func (a *Arena) hold(b *buffer, bytes int64) error {
	if bytes <= b.bytes && b.p != 0 {
		return nil
	}
	if b.p != 0 {
		if err := a.gpu.st.Sync("growing " + b.what); err != nil {
			return err
		}
		if err := a.gpu.free(b.p); err != nil {
			return err
		}
		b.p = 0
	}
	if b.bytes > 0 { // a slot sized too small for the session: a quarter more, so it does not grow every step
		bytes += bytes / 4
	}
	d, err := a.gpu.alloc(bytes, b.what)
	if err != nil {
		return err
	}
	a.gen++
	b.p, b.bytes = d, max(bytes, 1)
	return nil
}

// ---- launching -----------------------------------------------------------------

// call is what the launchers see of one launch.
type call struct {
	env *backends.Env
	p   *Program
	a   *Arena
	gpu *GPU
	k   *Kernels
	st  *driver.Stream
	B   int
	S   int
	M   int
	P   int
}

// graphChunkNodes is how many of a segment's nodes one graph of a decode
// call holds: the call runs as consecutive graphs, each launched as soon as
// its nodes are recorded, so that the GPU runs a chunk while the host
// records the next (one graph for the whole call left the GPU idle while
// the host recorded, diffed and updated it: the slice's decode step took
// 5.86 ms with one graph, 4.85 ms with plain launches).
const graphChunkNodes = 48

// graphChunks is the first chunk's size and the others' (graphChunkNodes
// both unless DS4_CUDA_GRAPH_CHUNKS=FIRST,REST says otherwise: for
// measuring the choice on a GPU).
var graphChunks = sync.OnceValues(func() (first, rest int) {
	first, rest = graphChunkNodes, graphChunkNodes
	if f, r, ok := strings.Cut(os.Getenv("DS4_CUDA_GRAPH_CHUNKS"), ","); ok {
		a, errA := strconv.Atoi(f)
		b, errB := strconv.Atoi(r)
		if errA == nil && errB == nil && a > 0 && b > 0 {
			first, rest = a, b
		}
	}
	return first, rest
})

// graphsFor is the graph cache of chunk k.
func (p *Program) graphsFor(k int) *driver.Graphs {
	for len(p.graphs) <= k {
		p.graphs = append(p.graphs, &driver.Graphs{})
	}
	return p.graphs[k]
}

// releaseGraphs destroys every chunk's graphs.
func (p *Program) releaseGraphs() {
	for _, gs := range p.graphs {
		gs.Release(p.gpu.ctx)
	}
}

// Launch implements backends.Program: it queues the segment's nodes on the
// stream and returns; Sync waits and checks the error flags.
//
// A decode call (S = 1) without a probe callback or op or node timing is
// recorded (driver.Tape) and replayed from a CUDA graph of the program: the
// first call of a structure is captured, later ones whose launches differ
// only in parameters (a position, a cache length) update the differing
// nodes and replay; one differing in over a quarter of its operations (a
// new session's buffers, a new B) is captured anew. The call is recorded
// and replayed in chunks of graphChunkNodes nodes, each graph launched
// while the host records the next chunk. What the host computes
// from the start position (positions, window indices, visible lengths) is
// staged and uploaded in one copy before the graph, so those values never
// touch it; nodes that do not read the start position replay their memo
// (memo.go) instead of running their launcher.
func (p *Program) Launch(env *backends.Env) error {
	// one thread with the context current for the whole call: its
	// launches skip binding each (driver.Stream.Bound)
	return p.gpu.st.Bound(func() error { return p.launch(env) })
}

func (p *Program) launch(env *backends.Env) (err error) {
	a, _ := env.Arena.(*Arena)
	if a == nil {
		if p.gpu.scratchArena == nil {
			if p.gpu.scratchArena, err = p.gpu.newArena(nil); err != nil {
				return err
			}
		}
		a = p.gpu.scratchArena
	}
	c := &call{env: env, p: p, a: a, gpu: p.gpu, k: p.gpu.k, st: p.gpu.st, B: env.B, S: env.S, M: env.M, P: env.StartPos}
	var tape *driver.Tape // recording: graphs, memos
	verify := false
	chunk := 0 // the chunk being recorded
	first, rest := graphChunks()
	next := first // the node that starts the next chunk
	observed := env.Probe != nil || env.OpTimes != nil || env.NodeTimes != nil
	graphed := p.graphsOn && env.S == 1 && !observed
	tlc, err := p.gpu.timeline.begin(p.gpu, p, graphed, observed)
	if err != nil {
		return err
	}
	defer func() { // after the last chunk's RunTape (deferred below)
		if err == nil {
			tlc.reached() // (late for the last chunk of a graphed call: after its RunTape)
			err = tlc.end(p.gpu, len(p.seg.Nodes))
		}
	}()
	if graphed {
		tape, verify = p.gpu.tapeFor(0), memoMode() == "verify"
		c.st.BeginTape(tape)
		defer func() {
			t := c.st.EndTape()
			if err == nil {
				err = c.st.RunTape(t, p.graphsFor(chunk))
			}
		}()
	}
	var tm *opTimer
	if env.OpTimes != nil || env.NodeTimes != nil {
		if tm, err = p.gpu.newOpTimer(len(p.seg.Nodes)); err != nil {
			return err
		}
	}
	if len(p.flag) > 0 {
		if err := c.st.Memset(p.flags, 0, 4*len(p.flag), "error flags"); err != nil {
			return err
		}
		p.gpu.pending = append(p.gpu.pending, p)
	}
	vals := make([]*Value, len(p.seg.Nodes))
	args := make([]*Value, 0, 8)
	var cur *ir.Node
	defer func() {
		if r := recover(); r != nil {
			err = &backends.KernelPanic{Node: what(cur), Value: r}
		}
	}()
	for i, n := range p.seg.Nodes {
		if i == next {
			next += rest
			tlc.reached()
			if tape != nil {
				// the previous chunk's graph runs while this one is recorded
				if err := c.st.RunTape(c.st.EndTape(), p.graphsFor(chunk)); err != nil {
					return err
				}
				chunk++
				tape = p.gpu.tapeFor(chunk)
				c.st.BeginTape(tape)
			}
			if err := tlc.mark(p.gpu, i); err != nil {
				return err
			}
		}
		if i < first {
			tlc.node(i)
		}
		cur = n
		args = args[:0]
		for k, j := range p.args[i] {
			if j >= 0 {
				args = append(args, vals[j])
				continue
			}
			v, err := asValue(env.Values[n.Args[k]], n.Args[k])
			if err != nil {
				return err
			}
			args = append(args, v)
		}
		if err := tm.mark(c.st, i); err != nil {
			return err
		}
		var memo *nodeMemo
		var mark driver.Mark
		if tape != nil && p.memoOK != nil && p.memoOK[i] {
			memo, mark = &p.memo[i], tape.Mark()
			if memo.hit(c, args) && !verify {
				tape.Append(&memo.rec)
				vals[i] = memo.out
				continue
			}
		}
		v, err := p.steps[i](c, i, n, args)
		if err != nil {
			return fmt.Errorf("%s: %w", what(n), err)
		}
		vals[i] = v
		if memo != nil {
			if verify && memo.hit(c, args) && (!tape.Same(mark, &memo.rec) || !sameOut(v, memo.out)) {
				return fmt.Errorf("%s: DS4_CUDA_MEMO=verify: the launcher queued other work than its memo", what(n))
			}
			memo.store(c, args, v, tape, mark)
		}
	}
	if err := tm.mark(c.st, len(p.seg.Nodes)); err != nil {
		return err
	}
	inputs := map[driver.Ptr]bool{}
	for _, b := range env.Inputs {
		if v, ok := b.(*Value); ok {
			inputs[v.Ptr] = true
		}
	}
	for _, n := range p.seg.Out {
		v := vals[p.index[n]]
		if inputs[v.Ptr] { // an input (or a view of one) handed on: the caller frees its inputs after the call
			if v, err = c.ownCopy(p.index[n], v); err != nil {
				return err
			}
		}
		env.Values[n] = v
	}
	return tm.add(p.seg.Nodes, env.OpTimes, env.NodeTimes)
}

// ownCopy copies v into node i's own buffer.
func (c *call) ownCopy(i int, v *Value) (*Value, error) {
	n := c.p.seg.Nodes[i]
	b := c.a.own[n]
	if b == nil {
		b = &buffer{what: what(n) + " (output)"}
		c.a.own[n] = b
	}
	if err := c.a.hold(b, v.Bytes()); err != nil {
		return nil, err
	}
	out := *v
	out.Ptr = b.p
	return &out, c.st.Copy(out.Ptr, v.Ptr, int(v.Bytes()), what(n))
}

// asValue checks that a buffer handed in is one of this backend's.
func asValue(b backends.Buffer, n *ir.Node) (*Value, error) {
	v, ok := b.(*Value)
	if !ok || v == nil {
		return nil, fmt.Errorf("%s: the value handed to the GPU is a %T, not a GPU buffer", what(n), b)
	}
	return v, nil
}

// checkFlags reads a program's error flags (after Sync, no further wait)
// and reports the first one set.
func (p *Program) checkFlags() error {
	fl := make([]int32, len(p.flag))
	if err := Download(p.gpu.st, fl, p.flags, "error flags"); err != nil {
		return err
	}
	for i, n := range p.seg.Nodes {
		k, ok := p.flag[i]
		if !ok || fl[k] == 0 {
			continue
		}
		what := "the embedding"
		if n.Op == "token_map" {
			what = "the Engram token map"
		}
		return fmt.Errorf("%%%d (%s): the token id at index %d is out of range of %s", n.ID, n.Op, fl[k]-1, what)
	}
	return nil
}

// out returns node i's output value in its buffer (its plan slot, or one
// of its own).
func (c *call) out(i int, dt ir.DType, shape []int) (*Value, error) {
	n := c.p.seg.Nodes[i]
	v := &Value{DType: dt, Shape: shape}
	var b *buffer
	if slot, ok := n.Attrs["buf"].(int64); ok && slot >= 0 {
		for int(slot) >= len(c.a.slots) {
			c.a.slots = append(c.a.slots, &buffer{what: fmt.Sprintf("arena slot %d", len(c.a.slots))})
		}
		b = c.a.slots[slot]
	} else {
		if b = c.a.own[n]; b == nil {
			b = &buffer{what: what(n)}
			c.a.own[n] = b
		}
	}
	if err := c.a.hold(b, v.Bytes()); err != nil {
		return nil, err
	}
	v.Ptr = b.p
	return v, nil
}

// scratch returns node i's k-th scratch buffer, holding at least bytes.
func (c *call) scratch(i, k int, bytes int64) (driver.Ptr, error) {
	n := c.p.seg.Nodes[i]
	s := c.a.scratch[n]
	for len(s) <= k {
		s = append(s, &buffer{what: fmt.Sprintf("%s scratch %d", what(n), len(s))})
	}
	c.a.scratch[n] = s
	if err := c.a.hold(s[k], bytes); err != nil {
		return 0, err
	}
	return s[k].p, nil
}

// upload copies host values into node i's k-th scratch buffer.
func uploadScratch[T any](c *call, i, k int, vals []T) (driver.Ptr, error) {
	b := asBytes(vals)
	p, err := c.scratch(i, k, int64(len(b)))
	if err != nil {
		return 0, err
	}
	return p, c.st.Upload(p, b, what(c.p.seg.Nodes[i]))
}

// bindings are the call's values of the shape symbols.
func (c *call) bindings() ir.Bindings {
	return ir.Bindings{B: int64(c.B), S: int64(c.S), M: int64(c.M), P: int64(c.P)}
}

// what names node n in errors (every launch passes it: made once a node).
func what(n *ir.Node) string {
	if n == nil {
		return "the GPU program"
	}
	if s, ok := whatNames.Load(n); ok {
		return s.(string)
	}
	s := fmt.Sprintf("%%%d (%s)", n.ID, n.Op)
	whatNames.Store(n, s)
	return s
}

// whatNames are the names what made, by node (a program's are dropped
// when it closes).
var whatNames sync.Map

// RopeTable computes rope_table node n's table for maximum length m (what
// the engine uploads as the node's table).
func RopeTable(n *ir.Node, m int) *backends.Tensor {
	a := n.Attrs
	tab := deepseekv4.FreqsCis(int(a.Int("dim", 0)), m, int(a.Int("original_seq_len", 0)),
		a.Float("base", 0), a.Float("factor", 1), a.Float("beta_fast", 32), a.Float("beta_slow", 1))
	return &backends.Tensor{DType: ir.F32, Shape: []int{m, tab.Pairs, 2}, F32: tab.CosSin}
}
