package backends

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ds4go/ds4/ir"
)

// Segment is a run of consecutive nodes of a graph (in the plan's order)
// placed on one backend: the unit a device prepares and launches.
type Segment struct {
	Graph   *ir.Graph
	Index   int    // position among the graph's segments
	Backend string // the backend that runs every node of Nodes
	Nodes   []*ir.Node
	// In are the values of other segments that Nodes read, in the order of
	// first use; the launcher puts them in Env.Values on this device.
	In []*ir.Node
	// Out are the values of Nodes read by later segments or by the graph's
	// outputs; Launch puts them in Env.Values.
	Out []*ir.Node
}

// Transfer is a value crossing from one backend's segment to another's.
type Transfer struct {
	Node     *ir.Node
	From, To string
	ToSeg    int  // the reading segment's index
	HandOver bool // both backends are host backends: no copy is made
}

// Bytes is the size of the value under the call's sizes b (floats as f32,
// as the buffers hold them; saturating).
func (t Transfer) Bytes(b ir.Bindings) int64 { return TypeBytes(t.Node.Type, b) }

// Placement is where each node of a graph runs: the segments, in order,
// and the transfers between them.
type Placement struct {
	Graph    *ir.Graph
	Primary  string
	Chain    []string            // the primary and its fallbacks, in order
	Backend  map[*ir.Node]string // every node's backend
	Segments []*Segment
	// Transfers are the values that cross a segment boundary between two
	// backends, once per reading segment.
	Transfers []Transfer
}

// Schedule places each node of g on the first backend of the chain
// (primary, its fallback, the fallback's fallback ...) whose capabilities
// admit it, with two rules: a node without arguments (weights, inputs,
// constants, state, RoPE tables) goes where its first reader runs when that
// backend admits it, so that a weight is bound where it is used; and a
// state lives on the backend of the ops that update it in place (all of
// them on one backend, or the graph is refused). It then cuts the graph into
// same-backend segments and lists the transfers at their boundaries.
func Schedule(g *ir.Graph, primary string) (*Placement, error) {
	chain, caps, err := fallbackChain(primary)
	if err != nil {
		return nil, err
	}
	pl := &Placement{Graph: g, Primary: primary, Chain: chain, Backend: map[*ir.Node]string{}}
	readers := map[*ir.Node][]*ir.Node{}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			readers[a] = append(readers[a], n)
		}
		be := ""
		for i, name := range chain {
			if caps[i].Supports(n) {
				be = name
				break
			}
		}
		if be == "" {
			return nil, fmt.Errorf("backend %s: %%%d (%s %s): no backend of %s runs it", primary, n.ID, n.Op, n.Type, strings.Join(chain, " → "))
		}
		pl.Backend[n] = be
	}
	capOf := func(name string) Capabilities {
		for i, c := range chain {
			if c == name {
				return caps[i]
			}
		}
		return Capabilities{}
	}
	for _, n := range g.Nodes {
		if len(n.Args) > 0 || len(readers[n]) == 0 {
			continue
		}
		if be := pl.Backend[readers[n][0]]; be != pl.Backend[n] && capOf(be).Supports(n) {
			pl.Backend[n] = be
		}
	}
	if err := pl.placeStates(readers, capOf); err != nil {
		return nil, err
	}
	pl.cut(caps)
	return pl, nil
}

// fallbackChain resolves primary and its fallbacks.
func fallbackChain(primary string) ([]string, []Capabilities, error) {
	var chain []string
	var caps []Capabilities
	for name := primary; name != ""; {
		for _, c := range chain {
			if c == name {
				return nil, nil, fmt.Errorf("backend %s: the fallbacks loop (%s → %s)", primary, strings.Join(chain, " → "), name)
			}
		}
		b, err := Get(name)
		if err != nil {
			return nil, nil, err
		}
		c := b.Capabilities()
		chain, caps = append(chain, name), append(caps, c)
		name = c.Fallback
	}
	return chain, caps, nil
}

// placeStates moves each state node to the backend of its in-place
// updaters (a StateUpdate's argument 0, followed back to the state node).
func (pl *Placement) placeStates(readers map[*ir.Node][]*ir.Node, capOf func(string) Capabilities) error {
	root := map[*ir.Node]*ir.Node{} // StateUpdate node → its state node
	owner := map[*ir.Node]string{}  // state node → backend of its first updater
	for _, n := range pl.Graph.Nodes {
		if info := n.Info(); info == nil || !info.Has(ir.StateUpdate) || len(n.Args) == 0 {
			continue
		}
		st := n.Args[0]
		if r, ok := root[st]; ok {
			st = r
		}
		if st.Op != "state" {
			continue
		}
		root[n] = st
		be := pl.Backend[n]
		if o, ok := owner[st]; ok && o != be {
			return fmt.Errorf("backend %s: state %q is updated on %s and on %s (%%%d %s)", pl.Primary, st.Attrs.Str("name", ""), o, be, n.ID, n.Op)
		}
		owner[st] = be
	}
	for st, be := range owner {
		if pl.Backend[st] == be {
			continue
		}
		if !capOf(be).Supports(st) {
			return fmt.Errorf("backend %s: state %q is updated on %s, which cannot hold it", pl.Primary, st.Attrs.Str("name", ""), be)
		}
		pl.Backend[st] = be
	}
	return nil
}

// cut splits the graph into runs of one backend and finds their boundaries.
func (pl *Placement) cut(caps []Capabilities) {
	host := map[string]bool{}
	for i, c := range pl.Chain {
		host[c] = caps[i].Host
	}
	pl.Segments = cutSegments(pl.Graph, func(n *ir.Node) string { return pl.Backend[n] }, pl.Backend, func(seg *Segment, a *ir.Node) {
		if from := pl.Backend[a]; from != seg.Backend {
			pl.Transfers = append(pl.Transfers, Transfer{Node: a, From: from, To: seg.Backend, ToSeg: seg.Index, HandOver: host[from] && host[seg.Backend]})
		}
	})
}

// cutSegments splits g's nodes into runs of one key (a node's backend,
// and for a ragged call whether it runs per row) and finds their
// boundaries: each segment's In (calling crossing for each) and Out.
func cutSegments(g *ir.Graph, key func(*ir.Node) string, backend map[*ir.Node]string, crossing func(seg *Segment, a *ir.Node)) []*Segment {
	var segs []*Segment
	segOf := map[*ir.Node]int{}
	var cur *Segment
	curKey := ""
	for _, n := range g.Nodes {
		k := key(n)
		if cur == nil || curKey != k {
			cur = &Segment{Graph: g, Index: len(segs), Backend: backend[n]}
			curKey = k
			segs = append(segs, cur)
		}
		cur.Nodes = append(cur.Nodes, n)
		segOf[n] = cur.Index
	}
	out := map[*ir.Node]bool{}
	for _, seg := range segs {
		seen := map[*ir.Node]bool{}
		for _, n := range seg.Nodes {
			for _, a := range n.Args {
				if segOf[a] == seg.Index || seen[a] {
					continue
				}
				seen[a] = true
				seg.In = append(seg.In, a)
				out[a] = true
				if crossing != nil {
					crossing(seg, a)
				}
			}
		}
	}
	for _, o := range g.Outputs {
		out[o.Node] = true
	}
	for _, seg := range segs {
		for _, n := range seg.Nodes {
			if out[n] {
				seg.Out = append(seg.Out, n)
			}
		}
	}
	return segs
}

// ByBackend counts the nodes of each op on each backend.
func (pl *Placement) ByBackend() map[string]map[string]int {
	m := map[string]map[string]int{}
	for _, n := range pl.Graph.Nodes {
		be := pl.Backend[n]
		if m[be] == nil {
			m[be] = map[string]int{}
		}
		m[be][n.Op]++
	}
	return m
}

// FallbackOps lists the ops (with counts) that do not run on the primary
// backend, grouped by backend: "cpu-ref: hc_pre×2, rope×4"; "" if none.
func (pl *Placement) FallbackOps() string {
	var parts []string
	by := pl.ByBackend()
	for _, be := range pl.Chain[1:] {
		var ops []string
		for op, n := range by[be] {
			ops = append(ops, fmt.Sprintf("%s×%d", op, n))
		}
		if len(ops) > 0 {
			sort.Strings(ops)
			parts = append(parts, be+": "+strings.Join(ops, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// CrossingBytes is the bytes copied between devices by one call under b
// (hand-overs between host backends cost nothing and are not counted).
func (pl *Placement) CrossingBytes(b ir.Bindings) int64 {
	var n int64
	for _, t := range pl.Transfers {
		if !t.HandOver {
			n = ir.SatAdd(n, t.Bytes(b))
		}
	}
	return n
}

// TypeBytes is the size of a value of type t under b as the buffers hold
// it (every float dtype in f32; saturating). A dimension it cannot evaluate
// counts as M, the largest run-time size.
func TypeBytes(t ir.Type, b ir.Bindings) int64 {
	n := ElemBytes(t.DType)
	for _, d := range t.Shape {
		v, err := b.Dim(d)
		if err != nil || v < 0 {
			v = b.M
		}
		n = ir.SatMul(n, v)
	}
	return n
}

// ElemBytes is the size of one element as the buffers hold it: float
// values of every float dtype live in float32.
func ElemBytes(dt ir.DType) int64 {
	switch dt {
	case ir.I64:
		return 8
	case ir.I32:
		return 4
	case ir.I8, ir.U8, ir.Bool:
		return 1
	}
	if dt.IsFloat() {
		return 4
	}
	if b := dt.Bits(); b >= 8 {
		return int64(b / 8)
	}
	return 1
}

// Report describes the placement for people (exec/compile -placement):
// the ops on each backend, the segments, and the values crossing between
// backends with their bytes under b.
func (pl *Placement) Report(b ir.Bindings) string {
	var sb strings.Builder
	copied := 0
	for _, t := range pl.Transfers {
		if !t.HandOver {
			copied++
		}
	}
	fmt.Fprintf(&sb, "graph %s on %s (chain %s): %d nodes in %d segments; %d values cross between backends (%d copied, %d handed over between host backends), %d bytes copied per call at B=%d S=%d M=%d\n",
		pl.Graph.Name, pl.Primary, strings.Join(pl.Chain, " → "), len(pl.Graph.Nodes), len(pl.Segments), len(pl.Transfers), copied, len(pl.Transfers)-copied, pl.CrossingBytes(b), b.B, b.S, b.M)
	by := pl.ByBackend()
	for _, be := range pl.Chain {
		ops := by[be]
		if len(ops) == 0 {
			continue
		}
		names := make([]string, 0, len(ops))
		total := 0
		for op, n := range ops {
			names = append(names, fmt.Sprintf("%s×%d", op, n))
			total += n
		}
		sort.Strings(names)
		fmt.Fprintf(&sb, "  %s: %d nodes: %s\n", be, total, strings.Join(names, ", "))
	}
	for _, seg := range pl.Segments {
		first, last := seg.Nodes[0], seg.Nodes[len(seg.Nodes)-1]
		fmt.Fprintf(&sb, "  segment %d on %s: %%%d..%%%d (%d nodes), %d values in, %d out", seg.Index, seg.Backend, first.ID, last.ID, len(seg.Nodes), len(seg.In), len(seg.Out))
		var bytes int64
		n := 0
		for _, t := range pl.Transfers {
			if t.ToSeg == seg.Index {
				n++
				if !t.HandOver {
					bytes = ir.SatAdd(bytes, t.Bytes(b))
				}
			}
		}
		if n > 0 {
			fmt.Fprintf(&sb, "; %d from other backends (%d bytes copied)", n, bytes)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
