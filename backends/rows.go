package backends

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ds4go/ds4/ir"
)

// Rows at different positions in one call (issue 15). The graphs are built
// around one start position per call (the start_pos input; shapes that
// mention P), so a ragged call cannot run every node once for all rows.
// RowWise classifies the nodes: a per-row node (it depends on the position,
// or reads a per-row value that cannot be stacked back into a [B, ...]
// tensor) runs once per row with B = 1 at that row's position; every other
// node (matmuls, norms, MoE, ...) runs once for all rows. The runner cuts
// the graph where the class changes (RunRows), slices the inputs of a
// per-row run to its row (views, so in-place updates of the state land in
// that row) and stacks its outputs back for the batched nodes. Ops whose
// kernels take every row's start position (RegisterRowPositions: on the
// cpu backends the window rings and indices, the Engram history and hash,
// the tokens' positions and their ropes) run once for all rows as well,
// and ops two host backends compute alike (RegisterPortable: on cpu and
// cpu-ref the caches, compressor, indexer selection, window and Engram
// ops) join the run before them instead of cutting it.

// RowDevice is a device that can run rows at different positions: the
// optional interface RunRows needs of every device of the placement.
type RowDevice interface {
	Device
	// RowView is row `row` of b's leading axis, a buffer of leading size 1
	// sharing b's memory (writes through it land in b).
	RowView(b Buffer, row int) (Buffer, error)
	// CopyRow copies src's values into row `row` of dst's leading axis
	// (src holds one row's elements).
	CopyRow(dst Buffer, row int, src Buffer) error
	// Clone is a copy of b in memory of its own.
	Clone(b Buffer) (Buffer, error)
}

// rowsCopier is a RowDevice that copies a row of one buffer into a row of
// another without a view (HostDevice).
type rowsCopier interface {
	CopyRows(dst Buffer, drow int, src Buffer, srow int) error
}

// RowsCapable reports whether every device of the placement can run rows
// at different positions (RowDevice).
func RowsCapable(pl *Placement, devs map[string]Device) bool {
	for _, seg := range pl.Segments {
		if _, ok := devs[seg.Backend].(RowDevice); !ok {
			return false
		}
	}
	return true
}

// mentionsP reports whether a type's shape depends on the start position.
func mentionsP(t ir.Type) bool {
	for _, d := range t.Shape {
		if strings.ContainsRune(d.Sym, 'P') {
			return true
		}
	}
	return false
}

// mentionsB reports whether a type's shape depends on the batch size.
func mentionsB(t ir.Type) bool {
	for _, d := range t.Shape {
		if strings.ContainsRune(d.Sym, 'B') {
			return true
		}
	}
	return false
}

// stackable reports whether per-row values of type t can be stacked into
// one value of all rows: a leading batch axis and no size that depends on
// the position.
func stackable(t ir.Type) bool {
	return len(t.Shape) > 0 && t.Shape[0].Sym == "B" && !mentionsP(t)
}

// rowPositions reports whether n is the positions of a call's tokens
// (ratio 1: i64[S], start_pos+t): per-row, and stacked for the rope
// nodes that read it, which take each row's positions as i64[B,S] in a
// ragged call (ir's rope row).
func rowPositions(n *ir.Node) bool {
	return n.Op == "positions" && n.Attrs.Int("ratio", 0) == 1 && len(n.Type.Shape) == 1 && !mentionsP(n.Type)
}

// Row positions. A host backend may declare that its kernels of some ops
// take a ragged call's start positions as i64[B] (each row's own) where a
// call has one i64[] (RegisterRowPositions): positions of ratio 1 then
// gives i64[B,S] and rope takes that as each row's positions. Those ops run
// once for all rows of a ragged call, and so do the states only they update
// in place: the call gathers the rows' state into one value of all rows for
// them and copies the updated rows back after.
var (
	rowPosMu  sync.Mutex
	rowPosOps = map[string]map[string]bool{}            // by backend, op
	portable  = map[string]map[string]map[string]bool{} // by backend, the placement's backend, op
)

// RegisterPortable declares that backend computes ops bit for bit as
// backend from does (the same kernels, values handed over between them), so
// that the cut of a ragged call (RunRows) may run a node of those ops placed
// on from on backend instead, in the run of the node before it: fewer runs,
// each a launch per row when per-row.
func RegisterPortable(backend, from string, ops ...string) {
	rowPosMu.Lock()
	defer rowPosMu.Unlock()
	if portable[backend] == nil {
		portable[backend] = map[string]map[string]bool{}
	}
	if portable[backend][from] == nil {
		portable[backend][from] = map[string]bool{}
	}
	for _, op := range ops {
		portable[backend][from][op] = true
	}
}

// rowBackends is the backend of each node of pl in a ragged call's cut: the
// placement's, or the node before it's where that one computes the node's
// op as the placement's does (RegisterPortable).
func rowBackends(pl *Placement) map[*ir.Node]string {
	be := maps.Clone(pl.Backend)
	rowPosMu.Lock()
	defer rowPosMu.Unlock()
	prev := ""
	for _, n := range pl.Graph.Nodes {
		if to := prev; to != "" && to != be[n] && portable[to][be[n]][n.Op] {
			be[n] = to
		}
		prev = be[n]
	}
	return be
}

// RegisterRowPositions declares that backend's kernels of ops take start_pos
// as i64[B] (row b at position start_pos[b]), positions of ratio 1 giving
// i64[B,S] then, and (for rope) positions as i64[B,T].
func RegisterRowPositions(backend string, ops ...string) {
	rowPosMu.Lock()
	defer rowPosMu.Unlock()
	if rowPosOps[backend] == nil {
		rowPosOps[backend] = map[string]bool{}
	}
	for _, op := range ops {
		rowPosOps[backend][op] = true
	}
}

// RowPositions reports whether node n of placement pl runs on a backend
// whose kernel of n's op takes each row's start position
// (RegisterRowPositions); a nil placement has none.
func RowPositions(pl *Placement) func(n *ir.Node) bool {
	if pl == nil {
		return func(*ir.Node) bool { return false }
	}
	return rowPosOn(pl.Backend)
}

// rowPosOn is RowPositions of nodes on the backends be.
func rowPosOn(be map[*ir.Node]string) func(n *ir.Node) bool {
	rowPosMu.Lock()
	ops := map[string]map[string]bool{}
	for be, m := range rowPosOps {
		ops[be] = m
	}
	rowPosMu.Unlock()
	return func(n *ir.Node) bool { return ops[be[n]][n.Op] }
}

// isStartPos reports whether n is the start_pos input.
func isStartPos(n *ir.Node) bool {
	return n.Op == "input" && n.Attrs.Str("name", "") == "start_pos"
}

// RowWise classifies the nodes of g: true for a per-row node (run once per
// row of a ragged call). A node is per-row when it is the start_pos input
// or a state, its type or an argument's type mentions P, or it reads a
// per-row value that is not stackable (a rope reading the tokens'
// positions is not per-row for that: it takes every row's positions);
// a node without arguments (weights, constants, RoPE tables, the tokens)
// is per-row when all its readers are, so that it does not cut a per-row
// run. With rowPos (RowPositions; nil: none), start_pos is a value of all
// rows (i64[B]) that the nodes rowPos accepts read as each row's own
// (positions of ratio 1 when its readers are all such ropes), and a state
// whose in-place updates are all such nodes is a value of all rows too.
func RowWise(g *ir.Graph, rowPos func(*ir.Node) bool) map[*ir.Node]bool {
	if rowPos == nil {
		rowPos = func(*ir.Node) bool { return false }
	}
	readers := map[*ir.Node][]*ir.Node{}
	var start *ir.Node
	for _, n := range g.Nodes {
		if isStartPos(n) {
			start = n
		}
		for _, a := range n.Args {
			readers[a] = append(readers[a], n)
		}
	}
	// ok: n reads start_pos as each row's own.
	ok := func(n *ir.Node) bool {
		if !rowPos(n) || mentionsP(n.Type) {
			return false
		}
		if n.Op == "positions" {
			if !rowPositions(n) {
				return false
			}
			for _, u := range readers[n] {
				if u.Op != "rope" || !rowPos(u) {
					return false
				}
			}
		}
		return true
	}
	startAll := false // start_pos is i64[B]: some reader takes each row's own
	if start != nil {
		for _, u := range readers[start] {
			startAll = startAll || ok(u)
		}
	}
	// updatesOK: every in-place update of v (and of those) is ok.
	var updatesOK func(v *ir.Node) bool
	updatesOK = func(v *ir.Node) bool {
		for _, u := range readers[v] {
			if info := u.Info(); info != nil && info.Has(ir.StateUpdate) && len(u.Args) > 0 && u.Args[0] == v {
				if !ok(u) || !updatesOK(u) {
					return false
				}
			}
		}
		return true
	}
	rw := map[*ir.Node]bool{}
	for _, n := range g.Nodes {
		r := mentionsP(n.Type) || (n.Op == "state" && !(startAll && updatesOK(n))) || (n == start && !startAll)
		if info := n.Info(); info != nil && info.Has(ir.StateUpdate) && len(n.Args) > 0 && rw[n.Args[0]] {
			r = true // an in-place update of a per-row state updates that row
		}
		for _, a := range n.Args {
			switch {
			case mentionsP(a.Type):
				r = true
			case a == start && startAll:
				r = r || !ok(n)
			case rw[a] && !stackable(a.Type) && !(n.Op == "rope" && rowPositions(a)):
				r = true
			}
		}
		if r {
			rw[n] = true
		}
	}
	for _, n := range g.Nodes {
		if len(n.Args) > 0 || rw[n] || len(readers[n]) == 0 || (n == start && startAll) {
			continue
		}
		all := true
		for _, u := range readers[n] {
			all = all && rw[u]
		}
		if all {
			rw[n] = true
		}
	}
	return rw
}

// rowPlan is a placement cut again where the per-row class changes, with
// its programs (prepared on the first ragged call).
type rowPlan struct {
	segs    []*Segment
	rowwise []bool // per segment
	progs   []Program
	inputs  [][]string
	rw      map[*ir.Node]bool
	backend map[*ir.Node]string // rowBackends: the placement's, or the node before it's
	segOf   map[*ir.Node]int
	state   map[*ir.Node]string // nodes whose value is a state's (the state node or an in-place update of it)
	// startAll: start_pos is a value of all rows (i64[B], RowWise's
	// rowPos); per-row readers get their row's.
	startAll bool
	// Of a segment of all rows: its state nodes (given the rows' state
	// gathered) and the states it updates in place (copied back after).
	segStates  [][]*ir.Node
	segUpdates [][]string
}

// rows prepares the runner's ragged plan once.
func (r *Runner) rows() (*rowPlan, error) {
	if r.rp != nil {
		return r.rp, nil
	}
	if !RowsCapable(r.pl, r.devs) {
		return nil, fmt.Errorf("graph %s: a backend of %s cannot run rows at different positions", r.pl.Graph.Name, strings.Join(r.pl.Chain, " → "))
	}
	be := rowBackends(r.pl)
	rw := RowWise(r.pl.Graph, rowPosOn(be))
	rp := &rowPlan{rw: rw, segOf: map[*ir.Node]int{}, state: map[*ir.Node]string{}, backend: be}
	for _, n := range r.pl.Graph.Nodes {
		rp.startAll = rp.startAll || (isStartPos(n) && !rw[n])
	}
	rp.segs = cutSegments(r.pl.Graph, func(n *ir.Node) string {
		if rw[n] {
			return rp.backend[n] + "|rows"
		}
		return rp.backend[n]
	}, rp.backend, nil)
	for _, seg := range rp.segs {
		rp.rowwise = append(rp.rowwise, rw[seg.Nodes[0]])
		var names, updates []string
		var states []*ir.Node
		for _, n := range seg.Nodes {
			rp.segOf[n] = seg.Index
			if n.Op == "input" {
				names = append(names, n.Attrs.Str("name", ""))
			}
			if n.Op == "state" {
				rp.state[n] = n.Attrs.Str("name", "")
				if !rw[n] {
					states = append(states, n)
				}
			} else if info := n.Info(); info != nil && info.Has(ir.StateUpdate) && len(n.Args) > 0 && rp.state[n.Args[0]] != "" {
				rp.state[n] = rp.state[n.Args[0]]
				if !rw[n] && !slices.Contains(updates, rp.state[n]) {
					updates = append(updates, rp.state[n])
				}
			}
		}
		rp.inputs = append(rp.inputs, names)
		rp.segStates = append(rp.segStates, states)
		rp.segUpdates = append(rp.segUpdates, updates)
		for _, a := range seg.In {
			if rw[seg.Nodes[0]] && !rw[a] && mentionsB(a.Type) && !stackable(a.Type) {
				return nil, fmt.Errorf("graph %s: per-row %%%d reads %%%d (%s %s), whose rows cannot be sliced: rows at different positions are not supported", r.pl.Graph.Name, seg.Nodes[0].ID, a.ID, a.Op, a.Type)
			}
		}
		p, err := r.devs[seg.Backend].Prepare(seg)
		if err != nil {
			return nil, fmt.Errorf("backend %s: preparing row segment %d (%d nodes from %%%d %s): %w", seg.Backend, seg.Index, len(seg.Nodes), seg.Nodes[0].ID, seg.Nodes[0].Op, err)
		}
		rp.progs = append(rp.progs, p)
	}
	r.rp = rp
	return rp, nil
}

// RowSegments is the ragged cut of the runner's graph (for tests and
// reports): each segment and whether it runs once per row.
func (r *Runner) RowSegments() ([]*Segment, []bool, error) {
	rp, err := r.rows()
	if err != nil {
		return nil, nil, err
	}
	return rp.segs, rp.rowwise, nil
}

// rowCall is the state of one ragged call.
type rowCall struct {
	r     *Runner
	rp    *rowPlan
	c     *Call
	full  map[string]map[*ir.Node]Buffer   // by backend: values of all rows
	rows  []map[string]map[*ir.Node]Buffer // by row, backend: per-row values
	ins   map[string]map[string]Buffer     // by backend: uploaded inputs
	made  map[string][]Buffer              // buffers the call made, by backend (freed at the end)
	start map[string][]Buffer              // by backend: each row's start_pos
	every map[string]Buffer                // by backend: every row's start_pos, i64[B] (rp.startAll)
	// gathered are the rows' states gathered for the segment of all rows
	// being launched, by name (copied back after when it updates them).
	gathered map[string]Buffer
}

// RowScratch holds the buffers of all rows that a ragged call stacks its
// per-row values into, by node, for the next call of as many rows (a value
// is written whole, row by row, so a reused buffer needs no clearing). A
// graph output stacked there is reused by the next call: the caller reads
// it first.
type RowScratch struct {
	stacked map[*ir.Node]Buffer
	dev     map[*ir.Node]Device
}

// Free releases the scratch's buffers.
func (s *RowScratch) Free() error {
	var first error
	for n, b := range s.stacked {
		if err := s.dev[n].Free(b); err != nil && first == nil {
			first = err
		}
	}
	s.stacked, s.dev = nil, nil
	return first
}

// stackedFor returns a buffer of dt [rows, sh[1:]...] on d for node n:
// the scratch's when it has one of that type, else a new one (kept by the
// scratch when there is one, else by the call).
func (rc *rowCall) stackedFor(n *ir.Node, be string, d Device, dt ir.DType, sh []int) (Buffer, error) {
	want := append([]int{rc.c.B}, sh[1:]...)
	s := rc.c.RowScratch
	if s != nil {
		if b, ok := s.stacked[n]; ok && s.dev[n] == d {
			if bdt, bsh := b.Type(); bdt == dt && slices.Equal(bsh, want) {
				return b, nil
			}
			if v := leadingRows(b, dt, want); v != nil {
				return v, nil
			}
			d.Free(b)
			delete(s.stacked, n)
		}
	}
	all, err := d.Alloc(dt, want)
	if err != nil {
		return nil, err
	}
	if s == nil {
		rc.made[be] = append(rc.made[be], all)
		return all, nil
	}
	if s.stacked == nil {
		s.stacked, s.dev = map[*ir.Node]Buffer{}, map[*ir.Node]Device{}
	}
	s.stacked[n], s.dev[n] = all, d
	return all, nil
}

// leadingRows is the first want[0] rows of b when b is a host tensor of
// dtype dt and shape want but for more rows (a view: the rows' count of a
// lane's steps changes as sequences join and leave, and a buffer of more
// rows serves without a new zeroed one), else nil.
func leadingRows(b Buffer, dt ir.DType, want []int) *Tensor {
	t, ok := b.(*Tensor)
	if !ok || t.DType != dt || t.Scale != nil || t.Parts != nil || len(t.Shape) != len(want) || len(want) == 0 ||
		t.Shape[0] < want[0] || !slices.Equal(t.Shape[1:], want[1:]) {
		return nil
	}
	n := t.NumElements() / t.Shape[0] * want[0]
	v := &Tensor{DType: dt, Shape: slices.Clone(want)}
	if t.F32 != nil {
		v.F32 = t.F32[:n:n]
	}
	if t.I64 != nil {
		v.I64 = t.I64[:n:n]
	}
	if t.I32 != nil {
		v.I32 = t.I32[:n:n]
	}
	if t.U8 != nil {
		v.U8 = t.U8[:n:n]
	}
	return v
}

// RunRows runs a ragged call: row b at position c.RowPos[b] with the state
// c.RowState[b] (views of its rows of the state buffers); c.B is the number
// of rows, c.StartPos is ignored. Per-row segments run once per row with
// B = 1; their stackable outputs are copied into values of all rows, the
// others kept per row. Probes are not supported (c.Probe must be nil).
func (r *Runner) RunRows(c *Call) (map[string]Buffer, error) {
	if len(c.RowPos) != c.B || len(c.RowState) != c.B || (c.RowArenas != nil && len(c.RowArenas) != c.B) {
		return nil, fmt.Errorf("ragged call of %d rows with %d positions, %d states and %d row arenas", c.B, len(c.RowPos), len(c.RowState), len(c.RowArenas))
	}
	if c.Probe != nil {
		return nil, fmt.Errorf("ragged call: probes are not supported")
	}
	rp, err := r.rows()
	if err != nil {
		return nil, err
	}
	rc := &rowCall{r: r, rp: rp, c: c, full: map[string]map[*ir.Node]Buffer{}, ins: map[string]map[string]Buffer{},
		made: map[string][]Buffer{}, start: map[string][]Buffer{}, rows: make([]map[string]map[*ir.Node]Buffer, c.B)}
	for b := range rc.rows {
		rc.rows[b] = map[string]map[*ir.Node]Buffer{}
	}
	out, err := rc.run()
	if ferr := rc.free(out); err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (rc *rowCall) run() (map[string]Buffer, error) {
	c, rp := rc.c, rc.rp
	for i, seg := range rp.segs {
		be := seg.Backend
		if !rp.rowwise[i] {
			env, err := rc.env(be, c.B, c.StartPos, c.State)
			if err != nil {
				return nil, err
			}
			if env.Inputs, err = rc.inputs(be, rp.inputs[i], -1); err != nil {
				return nil, err
			}
			clear(rc.gathered)
			if len(rp.segStates[i]) > 0 {
				env.State = map[string]Buffer{}
				for _, n := range rp.segStates[i] {
					if env.State[rp.state[n]], err = rc.stackState(n, rp.state[n], be); err != nil {
						return nil, err
					}
				}
			}
			for _, a := range seg.In {
				if env.Values[a], err = rc.value(a, be, -1); err != nil {
					return nil, err
				}
			}
			if err := rp.progs[i].Launch(env); err != nil {
				return nil, err
			}
			if err := rc.scatter(be, rp.segUpdates[i]); err != nil {
				return nil, err
			}
			if rc.full[be] == nil {
				rc.full[be] = map[*ir.Node]Buffer{}
			}
			for _, n := range seg.Out {
				v, ok := env.Values[n]
				if !ok {
					return nil, &KernelPanic{Node: fmt.Sprintf("%%%d (%s)", n.ID, n.Op), Value: fmt.Sprintf("backend %s did not return the value of segment %d's output", be, seg.Index)}
				}
				rc.full[be][n] = v
			}
			continue
		}
		if err := rc.runRows(i, seg); err != nil {
			return nil, err
		}
	}
	for be := range rc.full {
		if err := rc.r.devs[be].Sync(); err != nil {
			return nil, fmt.Errorf("backend %s: %w", be, err)
		}
	}
	out := map[string]Buffer{}
	for _, o := range rc.r.pl.Graph.Outputs {
		v, err := rc.value(o.Node, rc.rp.backend[o.Node], -1)
		if err != nil {
			return nil, err
		}
		out[o.Name] = v
	}
	return out, nil
}

// runRows runs per-row segment i once for every row and keeps its outputs:
// stacked into a value of all rows when stackable, else per row.
func (rc *rowCall) runRows(i int, seg *Segment) error {
	c, rp, be := rc.c, rc.rp, seg.Backend
	d := rc.r.devs[be].(RowDevice)
	stacked := map[*ir.Node]Buffer{}
	env, err := rc.env(be, 1, 0, nil) // one for every row: its values are dropped after each
	if err != nil {
		return err
	}
	// A per-row run must not write into the call's arena: its inputs are
	// views of values there, which the plan let a per-row node overwrite
	// once it read them (every row still needs them). In an arena of its
	// own, a row's values need no copy until its next run.
	env.Arena = nil
	for b := 0; b < c.B; b++ {
		env.StartPos, env.State = c.RowPos[b], c.RowState[b]
		if c.RowArenas != nil {
			env.Arena = c.RowArenas[b][be]
		}
		clear(env.Values)
		if env.Inputs, err = rc.inputs(be, rp.inputs[i], b); err != nil {
			return err
		}
		for _, a := range seg.In {
			if env.Values[a], err = rc.value(a, be, b); err != nil {
				return err
			}
		}
		if err := rp.progs[i].Launch(env); err != nil {
			return err
		}
		if rc.rows[b][be] == nil {
			rc.rows[b][be] = map[*ir.Node]Buffer{}
		}
		for _, n := range seg.Out {
			v, ok := env.Values[n]
			if !ok {
				return &KernelPanic{Node: fmt.Sprintf("%%%d (%s)", n.ID, n.Op), Value: fmt.Sprintf("backend %s did not return the value of segment %d's output", be, seg.Index)}
			}
			if rp.state[n] != "" { // the state row itself: read through the row's view
				continue
			}
			if rowPositions(n) { // per row, and stacked [B, S] for the batched ropes
				rc.rows[b][be][n] = v
			}
			if stackable(n.Type) || rowPositions(n) {
				if stacked[n] == nil {
					dt, sh := v.Type()
					if rowPositions(n) {
						sh = append([]int{1}, sh...)
					}
					if len(sh) == 0 || sh[0] != 1 {
						return fmt.Errorf("%%%d (%s): a per-row value of shape %v", n.ID, n.Op, sh)
					}
					all, err := rc.stackedFor(n, be, d, dt, sh)
					if err != nil {
						return fmt.Errorf("backend %s: %%%d (%s): %w", be, n.ID, n.Op, err)
					}
					stacked[n] = all
				}
				if err := d.CopyRow(stacked[n], b, v); err != nil {
					return fmt.Errorf("backend %s: %%%d (%s) row %d: %w", be, n.ID, n.Op, b, err)
				}
				continue
			}
			rc.rows[b][be][n] = v // (in the row's own arena, or fresh)
		}
	}
	if rc.full[be] == nil {
		rc.full[be] = map[*ir.Node]Buffer{}
	}
	for n, v := range stacked {
		rc.full[be][n] = v
	}
	return nil
}

// env is a launch environment on backend be for rows rows at position pos.
func (rc *rowCall) env(be string, rows, pos int, state map[string]Buffer) (*Env, error) {
	c := rc.c
	env := &Env{B: rows, S: c.S, M: c.M, StartPos: pos, State: state, Arena: c.Arenas[be],
		Values: map[*ir.Node]Buffer{}, OpTimes: c.OpTimes, NodeTimes: c.NodeTimes}
	if c.Weight != nil {
		env.Weight = func(n *ir.Node) (Buffer, error) { return c.Weight(be, n) }
	}
	if c.Rope != nil {
		env.Rope = func(n *ir.Node) (Buffer, error) { return c.Rope(be, n) }
	}
	return env, nil
}

// inputs are the graph inputs names on backend be: of all rows (row < 0) or
// of one row (a view of its row; start_pos is the row's position).
func (rc *rowCall) inputs(be string, names []string, row int) (map[string]Buffer, error) {
	if len(names) == 0 {
		return nil, nil
	}
	m := map[string]Buffer{}
	d := rc.r.devs[be]
	for _, name := range names {
		if row < 0 && name == "start_pos" && rc.rp.startAll { // every row's: i64[B]
			if rc.every[be] == nil {
				t := &Tensor{DType: ir.I64, Shape: []int{rc.c.B}}
				for _, p := range rc.c.RowPos {
					t.I64 = append(t.I64, int64(p))
				}
				b, err := d.Upload(t)
				if err != nil {
					return nil, fmt.Errorf("backend %s: uploading start_pos: %w", be, err)
				}
				if rc.every == nil {
					rc.every = map[string]Buffer{}
				}
				rc.every[be] = b
				rc.made[be] = append(rc.made[be], b)
			}
			m[name] = rc.every[be]
			continue
		}
		if row >= 0 && name == "start_pos" {
			if rc.start[be] == nil {
				rc.start[be] = make([]Buffer, rc.c.B)
			}
			if rc.start[be][row] == nil {
				b, err := d.Upload(&Tensor{DType: ir.I64, Shape: []int{}, I64: []int64{int64(rc.c.RowPos[row])}})
				if err != nil {
					return nil, fmt.Errorf("backend %s: uploading start_pos: %w", be, err)
				}
				rc.start[be][row] = b
				rc.made[be] = append(rc.made[be], b)
			}
			m[name] = rc.start[be][row]
			continue
		}
		if rc.ins[be] == nil {
			rc.ins[be] = map[string]Buffer{}
		}
		b, ok := rc.ins[be][name]
		if !ok {
			t, ok := rc.c.Inputs[name]
			if !ok {
				return nil, fmt.Errorf("input %q not given", name)
			}
			var err error
			if b, err = d.Upload(t); err != nil {
				return nil, fmt.Errorf("backend %s: uploading input %q: %w", be, name, err)
			}
			rc.ins[be][name] = b
			rc.made[be] = append(rc.made[be], b)
		}
		if row >= 0 {
			if _, sh := b.Type(); len(sh) > 0 && sh[0] == rc.c.B {
				v, err := d.(RowDevice).RowView(b, row)
				if err != nil {
					return nil, fmt.Errorf("backend %s: input %q row %d: %w", be, name, row, err)
				}
				b = v
			}
		}
		m[name] = b
	}
	return m, nil
}

// value is node a's value for a reader on backend to: of all rows (row <
// 0) or of one row.
func (rc *rowCall) value(a *ir.Node, to string, row int) (Buffer, error) {
	rp := rc.rp
	from := rc.rp.backend[a]
	var v Buffer
	switch {
	case rp.state[a] != "":
		name := rp.state[a]
		if row >= 0 {
			v = rc.c.RowState[row][name]
		} else {
			return rc.stackState(a, name, to)
		}
	case row >= 0 && isStartPos(a) && !rp.rw[a]: // every row's: this row's own
		m, err := rc.inputs(to, []string{"start_pos"}, row)
		if err != nil {
			return nil, err
		}
		return m["start_pos"], nil
	case rp.rw[a] && row >= 0:
		v = rc.rows[row][from][a] // (a row's positions: its own, not a view of the stacked ones)
		if v == nil {
			v = rc.full[from][a]
			if v != nil {
				return rc.view(v, from, to, row, a)
			}
		}
	default:
		v = rc.full[from][a]
		if v != nil && row >= 0 && (stackable(a.Type) || rowPositions(a)) { // (positions of all rows: i64[B,S])
			return rc.view(v, from, to, row, a)
		}
	}
	if v == nil {
		return nil, fmt.Errorf("%%%d (%s): no value (row %d) for backend %s", a.ID, a.Op, row, to)
	}
	return rc.moved(v, from, to)
}

// moved is v (on backend from) on backend to: the same buffer between host
// backends (Download and Upload hand the tensor over), else a copy.
func (rc *rowCall) moved(v Buffer, from, to string) (Buffer, error) {
	if from == to || v == nil {
		return v, nil
	}
	t, err := rc.r.devs[from].Download(v)
	if err != nil {
		return nil, fmt.Errorf("backend %s: reading a value for %s: %w", from, to, err)
	}
	out, err := rc.r.devs[to].Upload(t)
	if err != nil {
		return nil, fmt.Errorf("backend %s: receiving a value from %s: %w", to, from, err)
	}
	if Buffer(t) != out {
		rc.made[to] = append(rc.made[to], out)
	}
	return out, nil
}

// view is row row of v (on backend from) on backend to.
func (rc *rowCall) view(v Buffer, from, to string, row int, a *ir.Node) (Buffer, error) {
	v, err := rc.moved(v, from, to)
	if err != nil {
		return nil, err
	}
	out, err := rc.r.devs[to].(RowDevice).RowView(v, row)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %%%d (%s) row %d: %w", to, a.ID, a.Op, row, err)
	}
	return out, nil
}

// stackState is a copy of the rows' state name for a batched reader (the
// segment being launched keeps it in rc.gathered: one copy of each state
// for all its readers, copied back by scatter when the segment updates it).
func (rc *rowCall) stackState(a *ir.Node, name, to string) (Buffer, error) {
	from := rc.rp.backend[a]
	if v := rc.gathered[name]; v != nil {
		return rc.moved(v, from, to)
	}
	d := rc.r.devs[from].(RowDevice)
	var all Buffer
	for b := range rc.c.B {
		v := rc.c.RowState[b][name]
		if v == nil {
			return nil, fmt.Errorf("state %q: row %d has none", name, b)
		}
		if all == nil {
			dt, sh := v.Type()
			var err error
			if all, err = rc.stackedFor(a, from, d, dt, sh); err != nil {
				return nil, err
			}
		}
		if err := d.CopyRow(all, b, v); err != nil {
			return nil, fmt.Errorf("backend %s: state %q row %d: %w", from, name, b, err)
		}
	}
	if rc.gathered == nil {
		rc.gathered = map[string]Buffer{}
	}
	rc.gathered[name] = all
	return rc.moved(all, from, to)
}

// scatter copies the rows of the states names, updated in place by the
// segment of all rows just launched, back into the rows' states.
func (rc *rowCall) scatter(be string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	d := rc.r.devs[be].(RowDevice)
	if err := d.Sync(); err != nil {
		return fmt.Errorf("backend %s: %w", be, err)
	}
	for _, name := range names {
		all := rc.gathered[name]
		if all == nil {
			return fmt.Errorf("state %q: updated by a segment of all rows that was not given it", name)
		}
		rows, _ := d.(rowsCopier)
		for b := range rc.c.B {
			if rows != nil { // (no view of the row)
				if err := rows.CopyRows(rc.c.RowState[b][name], 0, all, b); err != nil {
					return fmt.Errorf("backend %s: state %q row %d: %w", be, name, b, err)
				}
				continue
			}
			v, err := d.RowView(all, b)
			if err != nil {
				return fmt.Errorf("backend %s: state %q row %d: %w", be, name, b, err)
			}
			if err := d.CopyRow(rc.c.RowState[b][name], 0, v); err != nil {
				return fmt.Errorf("backend %s: state %q row %d: %w", be, name, b, err)
			}
		}
	}
	return nil
}

// free releases the buffers the call made, except the outputs.
func (rc *rowCall) free(out map[string]Buffer) error {
	for be, bs := range rc.made {
		for _, b := range bs {
			if isOneOf(b, out) {
				continue
			}
			if err := rc.r.devs[be].Free(b); err != nil {
				return fmt.Errorf("backend %s: %w", be, err)
			}
		}
	}
	return nil
}

// Side-by-side calls. A host backend's kernels fork their loops onto the
// machine's cores; a caller that runs several calls at once (engine.Batch:
// a ragged step's row groups, prefills of different slots) keeps the cores
// busy itself, and forking inside each call would only add hand-offs. The
// backends register how to stop forking (RegisterInline, from init) and
// may register where side-by-side calls run (RegisterLanes); the caller
// runs its calls through Lanes, or holds Inline while it runs them itself.
var (
	inlineMu sync.Mutex
	inliners []func() (release func())
)

// RegisterInline adds f to what Inline holds: f stops the backend's kernels
// from forking until the release it returns is called.
func RegisterInline(f func() (release func())) {
	inlineMu.Lock()
	defer inlineMu.Unlock()
	inliners = append(inliners, f)
}

// laneRunner is what Lanes runs on (RegisterLanes); nil: goroutines.
var laneRunner func(n, width int, fn func(lane, i int))

// RegisterLanes makes Lanes run on f (from a host backend's init: its pool
// of helper threads, which start a call sooner than a fresh goroutine). f
// must do what Lanes says, and keep the backend's kernels from forking
// meanwhile; it replaces Inline there.
func RegisterLanes(f func(n, width int, fn func(lane, i int))) {
	inlineMu.Lock()
	defer inlineMu.Unlock()
	laneRunner = f
}

// Lanes runs fn(lane, i) for i in [0, n), each once, side by side on up to
// width goroutines (the caller's among them) that take the indices in order
// from one shared counter; lane (0 ≤ lane < width) is the goroutine's, so
// the calls of one lane (its arenas) run one after the other. The kernels
// inside run on their caller's goroutine (as under Inline).
func Lanes(n, width int, fn func(lane, i int)) {
	inlineMu.Lock()
	run := laneRunner
	inlineMu.Unlock()
	if run != nil {
		run(n, width, fn)
		return
	}
	release := Inline()
	defer release()
	var next atomic.Int32
	var wg sync.WaitGroup
	work := func(lane int) {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			fn(lane, i)
		}
	}
	for l := 1; l < min(width, n); l++ {
		wg.Go(func() { work(l) })
	}
	work(0)
	wg.Wait()
}

// Inline makes every registered backend run its kernels on the calling
// goroutine until release is called.
func Inline() (release func()) {
	inlineMu.Lock()
	var rs []func()
	for _, f := range inliners {
		rs = append(rs, f())
	}
	inlineMu.Unlock()
	return func() {
		for _, r := range rs {
			r()
		}
	}
}
