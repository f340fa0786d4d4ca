package driver

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// A Tape records a stream's work (launches, copies, memsets, small uploads)
// instead of running it, so that a call can be compared with the call a
// captured graph was made of and replayed from that graph. Every byte a
// launch depends on is recorded: the function, the grid, the block, the
// shared memory and each parameter's bytes; a copy's or memset's addresses
// and size; an upload's destination and size (its bytes are staged and go
// to the device in one copy before the work, so they may differ from one
// call to the next without touching the graph).
type Tape struct {
	ops     []tapeOp
	params  []byte  // every launch's parameter bytes, in order
	poff    []int32 // each parameter's start in params (one past the last: len(params))
	stage   []byte  // the uploads' bytes
	step    Ptr     // the device copy of stage, for graphs and captured runs
	stepN   int
	broken  bool    // some of the work ran already (a sync, a read, a large upload): not replayable
	flushes int     // times the recorded work had to run before the call ended
	diff    []int32 // the operations that differ from a graph's (diffs)
}

type opKind uint8

const (
	opLaunch opKind = iota
	opCopy
	opMemset
	opUpload
)

type tapeOp struct {
	kind        opKind
	fn          Function
	grid, block Dim3
	shmem       uint32
	p0, p1      int32 // parameters p0..p1-1 (indices into poff)
	dst, src    Ptr   // src of an upload: its offset in stage
	bytes       uint64
	val         byte
	what        string
}

// maxStagedUpload is the largest upload a tape stages; a larger one (a
// weight's fp32 copy at its first use) runs the recorded work first.
const maxStagedUpload = 256 << 10

// Reset empties the tape for a new call.
func (t *Tape) Reset() {
	t.ops, t.params, t.poff, t.stage, t.broken = t.ops[:0], t.params[:0], t.poff[:0], t.stage[:0], false
}

// Len is the number of operations recorded.
func (t *Tape) Len() int { return len(t.ops) }

// Broken reports whether part of the recorded work had to run before the
// call ended (the tape is then not replayable).
func (t *Tape) Broken() bool { return t.broken }

// Free releases the tape's device staging buffer.
func (t *Tape) Free(c *Context) error {
	if t.step == 0 {
		return nil
	}
	err := c.Free(t.step, "graph step block")
	t.step, t.stepN = 0, 0
	return err
}

// BeginTape makes s record into t (reset) until EndTape.
func (s *Stream) BeginTape(t *Tape) {
	t.Reset()
	s.tape = t
}

// EndTape stops recording and returns the tape (nil when none).
func (s *Stream) EndTape() *Tape {
	t := s.tape
	s.tape = nil
	return t
}

func (t *Tape) recordLaunch(f Function, grid, block Dim3, shmem int, what string, params [][]byte) error {
	op := tapeOp{kind: opLaunch, fn: f, grid: grid, block: block, shmem: uint32(shmem), p0: int32(len(t.poff)), what: what}
	for i, p := range params {
		if len(p) == 0 {
			return fmt.Errorf("cuLaunchKernel of %s for %s: parameter %d is empty", f.Name, what, i)
		}
		t.poff = append(t.poff, int32(len(t.params)))
		t.params = append(t.params, p...)
	}
	op.p1 = int32(len(t.poff))
	t.ops = append(t.ops, op)
	return nil
}

func (t *Tape) recordArgs(f Function, grid, block Dim3, shmem int, what string, args []Arg) {
	op := tapeOp{kind: opLaunch, fn: f, grid: grid, block: block, shmem: uint32(shmem), p0: int32(len(t.poff)), what: what}
	for _, a := range args {
		t.poff = append(t.poff, int32(len(t.params)))
		t.params = append(t.params, byte(a), byte(a>>8), byte(a>>16), byte(a>>24), byte(a>>32), byte(a>>40), byte(a>>48), byte(a>>56))
	}
	op.p1 = int32(len(t.poff))
	t.ops = append(t.ops, op)
}

// param is parameter k of the tape's bytes.
func (t *Tape) param(k int32) []byte {
	end := len(t.params)
	if int(k+1) < len(t.poff) {
		end = int(t.poff[k+1])
	}
	return t.params[t.poff[k]:end]
}

// flush runs what s recorded so far, directly, and marks the tape broken:
// a sync or a read must see the work done.
func (s *Stream) flush() error {
	t := s.tape
	s.tape = nil
	defer func() { s.tape = t }()
	err := s.runDirect(t)
	t.ops, t.params, t.poff, t.stage, t.broken = t.ops[:0], t.params[:0], t.poff[:0], t.stage[:0], true
	t.flushes++
	return err
}

// Mark is a position in a tape's record (Tape.Mark).
type Mark struct{ ops, poff, params, flushes int }

// Mark returns the tape's position now, for Slice.
func (t *Tape) Mark() Mark { return Mark{len(t.ops), len(t.poff), len(t.params), t.flushes} }

// Recording is a copy of the operations a tape recorded from a Mark on:
// what one node's launcher queued, kept to be appended to a later tape
// in place of running the launcher again.
type Recording struct {
	ops    []tapeOp // launches' p0, p1: indices into poff
	poff   []int32  // offsets into params
	params []byte
}

// Len is the number of operations recorded.
func (r *Recording) Len() int { return len(r.ops) }

// Slice copies into r what t recorded since m; false when that cannot be
// replayed as is: the record was run in between (a flush) or holds an
// upload (its bytes belong to the call).
func (t *Tape) Slice(m Mark, r *Recording) bool {
	if t.flushes != m.flushes {
		return false
	}
	r.ops = append(r.ops[:0], t.ops[m.ops:]...)
	for k := range r.ops {
		op := &r.ops[k]
		if op.kind == opUpload {
			return false
		}
		if op.kind == opLaunch {
			op.p0 -= int32(m.poff)
			op.p1 -= int32(m.poff)
		}
	}
	r.poff = r.poff[:0]
	for _, o := range t.poff[m.poff:] {
		r.poff = append(r.poff, o-int32(m.params))
	}
	r.params = append(r.params[:0], t.params[m.params:]...)
	return true
}

// Append records r's operations as if their launcher had queued them.
func (t *Tape) Append(r *Recording) {
	base, pbase := int32(len(t.poff)), int32(len(t.params))
	for _, op := range r.ops {
		if op.kind == opLaunch {
			op.p0 += base
			op.p1 += base
		}
		t.ops = append(t.ops, op)
	}
	for _, o := range r.poff {
		t.poff = append(t.poff, o+pbase)
	}
	t.params = append(t.params, r.params...)
}

// Same reports whether t recorded since m exactly what r holds.
func (t *Tape) Same(m Mark, r *Recording) bool {
	if t.flushes != m.flushes || len(t.ops)-m.ops != len(r.ops) || len(t.poff)-m.poff != len(r.poff) ||
		string(t.params[m.params:]) != string(r.params) {
		return false
	}
	for k, op := range t.ops[m.ops:] {
		q := r.ops[k]
		if op.kind == opLaunch {
			op.p0 -= int32(m.poff)
			op.p1 -= int32(m.poff)
		}
		op.what, q.what = "", ""
		if op != q {
			return false
		}
	}
	for k, o := range t.poff[m.poff:] {
		if o-int32(m.params) != r.poff[k] {
			return false
		}
	}
	return true
}

// runDirect launches t's operations one by one (uploads from the host).
func (s *Stream) runDirect(t *Tape) error {
	return s.c.do(func() error { return s.runOps(t, false) })
}

// runOps runs t's operations with s's context current; viaStep takes the
// uploads from the device copy of the stage (captured runs and graphs)
// instead of the host.
func (s *Stream) runOps(t *Tape, viaStep bool) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(t.params) > 0 {
		pin.Pin(&t.params[0])
	}
	ptrs := make([]unsafe.Pointer, 64)
	pin.Pin(&ptrs[0])
	for k := range t.ops {
		op := &t.ops[k]
		var r Result
		switch op.kind {
		case opLaunch:
			n := int(op.p1 - op.p0)
			if n+1 > len(ptrs) {
				ptrs = make([]unsafe.Pointer, 2*n+1)
				pin.Pin(&ptrs[0])
			}
			for j := range n {
				ptrs[j] = unsafe.Pointer(&t.params[t.poff[int(op.p0)+j]])
			}
			r = s.launchKernel(op.fn.h, op.grid, op.block, op.shmem, ptrs)
			s.count.Launches++
			if !s.capturing {
				s.count.Kernels++
			}
			if r != Success {
				return check(r, "cuLaunchKernel", fmt.Sprintf("of %s for %s (grid %d×%d×%d, block %d×%d×%d)",
					op.fn.Name, op.what, op.grid.X, op.grid.Y, op.grid.Z, op.block.X, op.block.Y, op.block.Z))
			}
		case opCopy:
			if r = cu.memcpyDtoDAsync(uint64(op.dst), uint64(op.src), op.bytes, s.h); r != Success {
				return check(r, "cuMemcpyDtoDAsync", fmt.Sprintf("of %s for %q", Size(op.bytes), op.what))
			}
		case opMemset:
			if r = cu.memsetD8Async(uint64(op.dst), op.val, op.bytes, s.h); r != Success {
				return check(r, "cuMemsetD8Async", fmt.Sprintf("of %s of %q", Size(op.bytes), op.what))
			}
		case opUpload:
			if viaStep {
				r = cu.memcpyDtoDAsync(uint64(op.dst), uint64(t.step+op.src), op.bytes, s.h)
			} else {
				r = cu.memcpyHtoDAsync(uint64(op.dst), unsafe.Pointer(&t.stage[op.src]), op.bytes, s.h)
			}
			if r != Success {
				return check(r, "cuMemcpyAsync", fmt.Sprintf("of %s to %q", Size(op.bytes), op.what))
			}
		}
	}
	runtime.KeepAlive(t)
	return nil
}

// Counters are what a stream ran: kernels launched by the host (those
// recorded into a graph included), kernels run (directly, or replayed:
// the graph's kernels per replay), graph replays, captures, and the node
// updates that let a graph serve a call whose parameters changed.
type Counters struct {
	Launches, Kernels, Replays, Captures, Updates int64
}

// Counters returns what s ran since it was created.
func (s *Stream) Counters() Counters { return s.count }

// Graphs is a stream's cache of captured graphs for one program: each
// graph is kept with the tape it was captured from (or last updated to).
// A call whose tape has the same structure (the same operations in the
// same order, launches of the same functions) is replayed from that graph
// after its changed nodes are updated in place; another structure is
// captured. Off (with Why) after a capture failed: the calls then run
// directly.
type Graphs struct {
	list []*Graph
	Off  bool
	Why  string
	// Rejected is the last node update the driver refused (the graph was
	// then captured anew), "" when none was.
	Rejected string
}

// maxGraphs is how many structures a Graphs keeps (the compressors' pooling
// steps cycle through a few); maxSameStructure is how many graphs of one
// structure it captures before updating the closest whatever it differs in.
const (
	maxGraphs        = 8
	maxSameStructure = 3
)

// Graph is one captured and instantiated graph.
type Graph struct {
	graph, exec uintptr
	nodes       []uintptr // one per tape op, in order; nil: not updatable
	tape        Tape      // what the nodes hold now (no stage)
	kernels     int64
}

// GraphsSupported reports whether the driver has the graph functions.
func GraphsSupported() bool {
	return cu.beginCapture != nil && cu.endCapture != nil && cu.graphInstantiate != nil && cu.graphLaunch != nil &&
		cu.graphExecDestroy != nil && cu.graphDestroy != nil
}

// RunTape runs a tape s recorded (after EndTape): from a graph of gs when
// one fits (updated, or captured now), directly when gs is nil or off or
// the tape is broken.
func (s *Stream) RunTape(t *Tape, gs *Graphs) error {
	if gs == nil || gs.Off || t.broken || !GraphsSupported() || len(t.ops) == 0 {
		return s.runDirect(t)
	}
	return s.c.do(func() error {
		if err := s.stageUp(t); err != nil {
			return err
		}
		best, bestDiff, listed, same := -1, 0, -1, 0 // listed: the graph t.diff was made against
		for i, g := range gs.list {
			if !sameStructure(&g.tape, t) {
				continue
			}
			d := diffs(&g.tape, t)
			listed, same = i, same+1
			if best < 0 || d < bestDiff {
				best, bestDiff = i, d
			}
		}
		// Another session's buffers or a new B change nearly all of a
		// call's operations: a graph of its own then (captured anew) keeps
		// each replaying with few updates. But a call's chunk (a program's
		// graphChunkNodes nodes) may have most of its few operations read
		// the position, so that every step differs from every graph in
		// over half of them: past maxSameStructure graphs of one structure
		// the closest is updated instead of capturing again.
		if best >= 0 && (bestDiff <= len(t.ops)/2 || same >= maxSameStructure) {
			g := gs.list[best]
			if listed != best {
				diffs(&g.tape, t)
			}
			ok, err := s.update(g, t)
			if err != nil {
				return err
			}
			if s.rejected != nil {
				gs.Rejected, s.rejected = s.rejected.Error(), nil
			}
			if ok {
				copy(gs.list[1:best+1], gs.list[:best]) // most recent first
				gs.list[0] = g
				return s.replay(g)
			}
			g.destroy() // a node that cannot be updated: capture anew
			gs.list = append(gs.list[:best], gs.list[best+1:]...)
		}
		g, err := s.capture(t)
		if err != nil {
			gs.Off, gs.Why = true, err.Error()
			return s.runOps(t, true)
		}
		if len(gs.list) == maxGraphs {
			gs.list[maxGraphs-1].destroy()
			gs.list = gs.list[:maxGraphs-1]
		}
		gs.list = append([]*Graph{g}, gs.list...)
		return s.replay(g)
	})
}

// Release destroys the cached graphs.
func (gs *Graphs) Release(c *Context) {
	if gs == nil || len(gs.list) == 0 {
		return
	}
	c.do(func() error {
		for _, g := range gs.list {
			g.destroy()
		}
		return nil
	})
	gs.list = nil
}

// Len is the number of graphs cached.
func (gs *Graphs) Len() int { return len(gs.list) }

// stageUp copies the tape's staged uploads to its device step block (one
// copy, before the graph or the captured work).
func (s *Stream) stageUp(t *Tape) error {
	if len(t.stage) == 0 {
		return nil
	}
	if t.stepN < len(t.stage) {
		if t.step != 0 {
			if err := check(cu.streamSync(s.h), "cuStreamSynchronize", "growing the graph step block"); err != nil {
				return err
			}
			cu.memFree(uint64(t.step))
			t.step, t.stepN = 0, 0
		}
		n := max(len(t.stage)*2, 4096)
		var p uint64
		if err := check(cu.memAlloc(&p, uint64(n)), "cuMemAlloc", fmt.Sprintf("of %s for the graph step block", Size(uint64(n)))); err != nil {
			return err
		}
		t.step, t.stepN = Ptr(p), n
	}
	r := cu.memcpyHtoDAsync(uint64(t.step), unsafe.Pointer(&t.stage[0]), uint64(len(t.stage)), s.h)
	runtime.KeepAlive(t.stage)
	return check(r, "cuMemcpyHtoDAsync", fmt.Sprintf("of the %s step block", Size(uint64(len(t.stage)))))
}

// sameStructure reports whether b's operations match a's one for one in
// kind (and function, for launches).
func sameStructure(a, b *Tape) bool {
	if len(a.ops) != len(b.ops) {
		return false
	}
	for k := range a.ops {
		x, y := &a.ops[k], &b.ops[k]
		if x.kind != y.kind || (x.kind == opLaunch && (x.fn.h != y.fn.h || x.p1-x.p0 != y.p1-y.p0)) {
			return false
		}
	}
	return true
}

// diffs lists in t.diff the operations of b launched unlike a's (same
// structure) and returns their count.
func diffs(a, b *Tape) int {
	b.diff = b.diff[:0]
	for k := range a.ops {
		if !sameOp(a, b, k) {
			b.diff = append(b.diff, int32(k))
		}
	}
	return len(b.diff)
}

// sameOp reports whether op k of a and of b are launched alike.
func sameOp(a, b *Tape, k int) bool {
	x, y := &a.ops[k], &b.ops[k]
	switch x.kind {
	case opLaunch:
		return x.grid == y.grid && x.block == y.block && x.shmem == y.shmem && x.p1-x.p0 == y.p1-y.p0 &&
			string(a.paramRange(x)) == string(b.paramRange(y))
	case opUpload: // the bytes come from the step block: only where they go matters
		return x.dst == y.dst && x.src == y.src && x.bytes == y.bytes && a.step == b.step
	}
	return x.dst == y.dst && x.src == y.src && x.bytes == y.bytes && x.val == y.val
}

// paramRange is the bytes of every parameter of launch op (contiguous).
func (t *Tape) paramRange(op *tapeOp) []byte {
	if op.p0 == op.p1 {
		return nil
	}
	end := len(t.params)
	if int(op.p1) < len(t.poff) {
		end = int(t.poff[op.p1])
	}
	return t.params[t.poff[op.p0]:end]
}

// kernelNodeParams is CUDA_KERNEL_NODE_PARAMS_v2 (its first fields are
// CUDA_KERNEL_NODE_PARAMS).
type kernelNodeParams struct {
	fn         uintptr
	gx, gy, gz uint32
	bx, by, bz uint32
	shmem      uint32
	params     *unsafe.Pointer
	extra      uintptr
	kern, ctx  uintptr
}

// memsetNodeParams is CUDA_MEMSET_NODE_PARAMS_v2 (CUDA_MEMSET_NODE_PARAMS
// and a context: a driver that reads the first version ignores it).
type memsetNodeParams struct {
	dst, pitch         uint64
	value, elementSize uint32
	width, height      uint64
	ctx                uintptr
}

// memcpy3D is CUDA_MEMCPY3D, for 1-D device-to-device copies.
type memcpy3D struct {
	srcX, srcY, srcZ, srcLOD uint64
	srcType                  uint32
	_                        uint32
	srcHost, srcDevice       uint64
	srcArray, reserved0      uint64
	srcPitch, srcHeight      uint64
	dstX, dstY, dstZ, dstLOD uint64
	dstType                  uint32
	_                        uint32
	dstHost, dstDevice       uint64
	dstArray, reserved1      uint64
	dstPitch, dstHeight      uint64
	width, height, depth     uint64
}

const memoryTypeDevice = 2 // CU_MEMORYTYPE_DEVICE

// update brings g's nodes to t's parameters where they differ (t.diff,
// listed by diffs against g); false when a node could not be updated (the
// graph must be captured anew).
func (s *Stream) update(g *Graph, t *Tape) (bool, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	var ptrs []unsafe.Pointer
	for _, k := range t.diff { // diffs(&g.tape, t) listed them
		if g.nodes == nil || cu.execKernelSetParams == nil {
			return false, nil
		}
		op := &t.ops[k]
		var r Result
		call := "cuGraphExecKernelNodeSetParams"
		switch op.kind {
		case opLaunch:
			n := int(op.p1 - op.p0)
			ptrs = make([]unsafe.Pointer, n+1)
			pin.Pin(&ptrs[0])
			if len(t.params) > 0 {
				pin.Pin(&t.params[0])
			}
			for j := range n {
				ptrs[j] = unsafe.Pointer(&t.params[t.poff[int(op.p0)+j]])
			}
			kp := kernelNodeParams{fn: op.fn.h, gx: op.grid.X, gy: op.grid.Y, gz: op.grid.Z, bx: op.block.X, by: op.block.Y, bz: op.block.Z,
				shmem: op.shmem, params: &ptrs[0]}
			r = cu.execKernelSetParams(g.exec, g.nodes[k], unsafe.Pointer(&kp))
		case opMemset:
			if cu.execMemsetSetParams == nil {
				return false, nil
			}
			mp := memsetNodeParams{dst: uint64(op.dst), pitch: op.bytes, value: uint32(op.val), elementSize: 1, width: op.bytes, height: 1, ctx: s.c.h}
			r = cu.execMemsetSetParams(g.exec, g.nodes[k], unsafe.Pointer(&mp), s.c.h)
			call = "cuGraphExecMemsetNodeSetParams"
		default:
			if cu.execMemcpySetParams == nil {
				return false, nil
			}
			src := op.src
			if op.kind == opUpload {
				src += t.step
			}
			mp := memcpy3D{srcType: memoryTypeDevice, srcDevice: uint64(src), srcPitch: op.bytes, srcHeight: 1,
				dstType: memoryTypeDevice, dstDevice: uint64(op.dst), dstPitch: op.bytes, dstHeight: 1, width: op.bytes, height: 1, depth: 1}
			r = cu.execMemcpySetParams(g.exec, g.nodes[k], unsafe.Pointer(&mp), s.c.h)
			call = "cuGraphExecMemcpyNodeSetParams"
		}
		if r != Success { // (named only here: the driver may refuse a memset's or copy's new size)
			what := fmt.Sprintf("of operation %d (%s)", k, op.what)
			if op.kind != opLaunch {
				what = fmt.Sprintf("of operation %d (%s, %s)", k, op.what, Size(op.bytes))
			}
			s.rejected = check(r, call, what)
			return false, nil
		}
		s.count.Updates++
	}
	g.take(t)
	return true, nil
}

// take makes t's operations the graph's record, swapping buffers with it
// (t is reset at its next recording; its stage stays).
func (g *Graph) take(t *Tape) {
	g.tape.ops, t.ops = t.ops, g.tape.ops
	g.tape.params, t.params = t.params, g.tape.params
	g.tape.poff, t.poff = t.poff, g.tape.poff
	g.tape.step = t.step
}

// pdlGraphs is whether captures keep programmatic launches (as
// programmatic edges of the graph): DS4_CUDA_PDL_GRAPHS=1, until measured.
var pdlGraphs = os.Getenv("DS4_CUDA_PDL_GRAPHS") == "1"

// capture records t's work into a new graph (uploads from the step block).
func (s *Stream) capture(t *Tape) (*Graph, error) {
	const relaxed = 2 // CU_STREAM_CAPTURE_MODE_RELAXED
	if err := check(cu.beginCapture(s.h, relaxed), "cuStreamBeginCapture", "of a decode step"); err != nil {
		return nil, err
	}
	s.capturing = true
	pdl := s.pdl
	if !pdlGraphs {
		s.pdl = nil // captured as plain launches (see pdlGraphs)
	}
	runErr := s.runOps(t, true)
	s.capturing, s.pdl = false, pdl
	g := &Graph{}
	if err := check(cu.endCapture(s.h, &g.graph), "cuStreamEndCapture", "of a decode step"); err != nil || runErr != nil {
		if g.graph != 0 {
			cu.graphDestroy(g.graph)
		}
		if runErr != nil {
			return nil, runErr
		}
		return nil, err
	}
	if err := check(cu.graphInstantiate(&g.exec, g.graph, 0), "cuGraphInstantiateWithFlags", fmt.Sprintf("of %d nodes", len(t.ops))); err != nil {
		cu.graphDestroy(g.graph)
		return nil, err
	}
	for k := range t.ops {
		if t.ops[k].kind == opLaunch {
			g.kernels++
		}
	}
	g.nodes = chain(g.graph, len(t.ops))
	g.take(t)
	s.count.Captures++
	return g, nil
}

// chain returns a captured graph's nodes in order (one stream's capture is
// a chain from one root), nil when the graph is not a chain of n nodes.
func chain(graph uintptr, n int) []uintptr {
	if cu.graphGetRootNodes == nil || (cu.nodeGetDependents == nil && cu.nodeGetDependentsV2 == nil) || n == 0 {
		return nil
	}
	var roots [2]uintptr
	var cnt uint64 = 2
	if cu.graphGetRootNodes(graph, &roots[0], &cnt) != Success || cnt != 1 {
		return nil
	}
	node := roots[0]
	nodes := make([]uintptr, 0, n)
	for {
		nodes = append(nodes, node)
		var next [2]uintptr
		var edges [2]graphEdge // programmatic launches make the edges programmatic: without their data the query is "lossy" (refused)
		cnt = 2
		var r Result
		if cu.nodeGetDependentsV2 != nil {
			r = cu.nodeGetDependentsV2(node, &next[0], &edges[0], &cnt)
		} else {
			r = cu.nodeGetDependents(node, &next[0], &cnt)
		}
		if r != Success || cnt > 1 || len(nodes) > n {
			return nil
		}
		if cnt == 0 {
			break
		}
		node = next[0]
	}
	if len(nodes) != n {
		return nil
	}
	return nodes
}

// graphEdge is CUgraphEdgeData: from port, to port, type, 5 reserved
// bytes (only received here).
type graphEdge [8]uint8

// replay launches g on s.
func (s *Stream) replay(g *Graph) error {
	if err := check(cu.graphLaunch(g.exec, s.h), "cuGraphLaunch", fmt.Sprintf("of %d kernels", g.kernels)); err != nil {
		return err
	}
	s.count.Replays++
	s.count.Kernels += g.kernels
	return nil
}

func (g *Graph) destroy() {
	if g.exec != 0 {
		cu.graphExecDestroy(g.exec)
	}
	if g.graph != 0 {
		cu.graphDestroy(g.graph)
	}
	g.exec, g.graph = 0, 0
}
