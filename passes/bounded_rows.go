package passes

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/ir"
)

// allRows is the need of a value every row of which is read.
const allRows = int64(1) << 40

// RowNeeds is the bounded-replay analysis of a prompt graph: for every
// node, how many trailing positions of the prompt a call that needs only
// the last position's logits and the caches must compute it on (0: none,
// allRows: every one). It works backwards from the outputs: the logits
// need the last row; a window_update needs the last rows its ring holds
// (the window, the state's row count) of the keys it writes; every other
// state update (compressor states, compressed and index-key caches, the
// Engram history) needs all of its arguments' rows. A row op (ir.RowOp)
// needs of its row-aligned arguments the rows wanted of it; sparse_attn
// needs of the window keys it addresses those rows widened by its window
// (the window_idx behind its index list), of the compressed rows every
// row; a concat along the rows passes the trailing rows to its last
// argument; any other op needs every row of its arguments.
//
// Rows are counted from the end of the prompt, so one analysis serves a
// prefill call and every chunk of a chunked one: a chunk ending r rows
// before the prompt's end computes a node wanting k rows on its last
// k − r rows. The window ring a chunk writes and the next one reads holds
// the rows the next one wants, since both run the same graph.
func RowNeeds(g *ir.Graph) map[*ir.Node]int64 {
	need := make(map[*ir.Node]int64, len(g.Nodes))
	want := func(n *ir.Node, k int64) {
		if k > need[n] {
			need[n] = min(k, allRows)
		}
	}
	for _, o := range g.Outputs {
		if o.Name == "logits" && ir.RowAxis(o.Node.Type.Shape) >= 0 {
			want(o.Node, 1)
		} else {
			want(o.Node, allRows)
		}
	}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		info := n.Info()
		if info != nil && info.Has(ir.StateUpdate) {
			if n.Op == "window_update" && len(n.Args) >= 2 && n.Args[0].Type.Shape.Rank() >= 2 && n.Args[0].Type.Shape[1].IsConst() {
				want(n.Args[1], n.Args[0].Type.Shape[1].N)
				continue
			}
			for _, a := range n.Args {
				want(a, allRows)
			}
			continue
		}
		k := need[n]
		if k == 0 {
			continue
		}
		switch {
		case ir.RowOp(n):
			for j, a := range n.Args {
				switch ir.RowArg(n, j) {
				case ir.RowAligned:
					want(a, k)
				case ir.RowWhole:
					if n.Op == "sparse_attn" && j == 1 {
						if w := attnWindow(n); w > 0 {
							want(a, k+w-1)
							continue
						}
					}
					want(a, allRows)
				}
			}
		case n.Op == "concat" && rowConcat(n):
			for j, a := range n.Args {
				if j == len(n.Args)-1 {
					want(a, k)
				} else {
					want(a, allRows)
				}
			}
		default:
			for _, a := range n.Args {
				want(a, allRows)
			}
		}
	}
	return need
}

// attnWindow is the window of sparse_attn n's window entries: the
// window_idx its index list starts with (through probes and concats of
// index lists), 0 when there is none.
func attnWindow(n *ir.Node) int64 {
	x := n.Args[3]
	for x != nil {
		switch x.Op {
		case "probe":
			x = x.Args[0]
		case "concat":
			if x.Attrs.Int("axis", -1) != 2 && x.Attrs.Int("axis", -1) != -1 {
				return 0
			}
			x = x.Args[0]
		case "window_idx":
			return x.Attrs.Int("window", 0)
		default:
			return 0
		}
	}
	return 0
}

// rowConcat reports whether concat n joins values along the rows with a
// value of the call's rows last (the window ring, then the call's keys).
func rowConcat(n *ir.Node) bool {
	last := n.Args[len(n.Args)-1]
	return ir.RowAxis(last.Type.Shape) == 1 && n.Attrs.Int("axis", -1) == 1
}

// BoundedRows records RowNeeds in the graph: every row op that a call
// needing only the last position's logits may compute on fewer than all
// of the prompt's rows gets the attribute rows (the trailing rows it
// needs; 1 for a value nothing reads then but a probe). Executors apply it
// only to such calls (backends.Call.Tail); a call that returns every
// position's logits, a trace or a dump, ignores it.
func BoundedRows(g *ir.Graph) error {
	need := RowNeeds(g)
	for _, n := range g.Nodes {
		delete(n.Attrs, "rows")
		if !ir.RowOp(n) || ir.RowView(n) {
			continue
		}
		k := need[n]
		if k >= allRows {
			continue
		}
		if n.Attrs == nil {
			n.Attrs = ir.Attrs{}
		}
		n.Attrs["rows"] = max(k, 1)
	}
	return nil
}

// LayerRows is the rows each layer of g computes for a prompt of S
// tokens with bounded replay: the most rows any of its nodes needs
// (a node without the attribute rows needs all S). Layers are the probes'
// "L<n>." prefixes; nodes before the first layer are left out.
func LayerRows(g *ir.Graph, S int64) []int64 {
	var out []int64
	layer := -1
	for _, n := range g.Nodes {
		if n.Op == "probe" {
			name := n.Attrs.Str("name", "")
			if l, ok := layerOf(name); ok && l != layer {
				if l < layer {
					continue
				}
				for len(out) <= l {
					out = append(out, 0)
				}
				layer = l
			}
		}
		if layer < 0 || !ir.RowOp(n) || ir.RowView(n) {
			continue
		}
		k := S
		if r, ok := n.Attrs["rows"].(int64); ok {
			k = min(r, S)
		}
		out[layer] = max(out[layer], k)
	}
	return out
}

func layerOf(name string) (int, bool) {
	if !strings.HasPrefix(name, "L") {
		return 0, false
	}
	d, _, ok := strings.Cut(name[1:], ".")
	if !ok {
		return 0, false
	}
	l, err := strconv.Atoi(d)
	return l, err == nil
}

// FormatLayerRows prints LayerRows as "layers a-b: n rows" runs.
func FormatLayerRows(rows []int64) string {
	var b strings.Builder
	for i := 0; i < len(rows); {
		j := i
		for j+1 < len(rows) && rows[j+1] == rows[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if i == j {
			fmt.Fprintf(&b, "%d: %d", i, rows[i])
		} else {
			fmt.Fprintf(&b, "%d-%d: %d", i, j, rows[i])
		}
		i = j + 1
	}
	return b.String()
}
