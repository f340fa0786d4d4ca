package ir

// Row semantics: which ops compute each position of a call (a row) from
// the same row of their arguments. The bounded-replay analysis
// (passes.BoundedRows) walks them backwards from the outputs, and an
// executor that computes a node on its trailing rows only slices the
// arguments RowArg calls RowAligned.

// RowUse is how a row op reads one argument.
type RowUse uint8

// Argument uses of a row op.
const (
	RowAligned RowUse = iota // output row t reads row t of the argument (or the argument has no rows: a weight)
	RowWhole                 // the argument is read whole (a cache, the keys an index list addresses)
	RowShape                 // only the argument's shape is read
)

// RowAxis is the axis of s that holds the call's positions: 1 for
// [B,S,...], 0 for [B*S,...] and [S]; -1 when s has none.
func RowAxis(s Shape) int {
	switch {
	case len(s) >= 2 && s[0].Sym == "B" && s[1].Sym == "S":
		return 1
	case len(s) >= 1 && (s[0].Sym == "B*S" || (len(s) == 1 && s[0].Sym == "S")):
		return 0
	}
	return -1
}

// rowOps are the ops whose output row t depends only on row t of their
// row-holding arguments (along a reduction or selection axis other than
// the rows' own), each with the arguments it reads otherwise.
var rowOps = map[string]map[int]RowUse{
	"cast": nil, "clamp": nil, "add_scalar": nil, "mul_scalar": nil, "mask_fill": nil,
	"act_quant": nil, "fp4_quant": nil, "mean_sq": nil, "sum": nil, "softmax": nil,
	"reshape": nil, "slice": nil, "concat": nil, "expand": nil, "embed": nil, "token_map": nil,
	"gather": nil, "topk_idx": nil, "matmul": nil, "matmul_fp8": nil, "matmul_fp4": nil,
	"grouped_matmul": nil, "expert_matmul": nil, "moe_combine": nil, "rmsnorm": nil,
	"hc_pre": nil, "hc_post": nil, "rope": nil, "probe": nil, "hc_mix": nil,
	"hc_split_sinkhorn": nil, "swiglu_clamp": nil,
	"add": nil, "sub": nil, "mul": nil, "div": nil,
	"sigmoid": nil, "silu": nil, "rsqrt": nil, "sqrt": nil, "exp": nil, "relu": nil, "softplus": nil,
	// q and idx by row; kv (window rows, addressed by idx) and kv2 (the
	// compressed rows) whole
	"sparse_attn": {1: RowWhole, 4: RowWhole},
	// q and the head weights by row, the index keys whole
	"index_score": {1: RowWhole},
	// the row's position is start_pos plus its row (an executor that
	// slices rows moves start_pos with them); kv's rows only give the
	// offset of the compressed indices
	"index_mask":       nil,
	"candidate_blocks": nil,
	"index_topk":       {2: RowShape},
}

// RowOp reports whether n computes each of its output's rows from the same
// row of its arguments that have rows (RowArg): an executor may compute it
// on trailing rows only, given those rows of them.
func RowOp(n *Node) bool {
	uses, ok := rowOps[n.Op]
	if !ok {
		return false
	}
	ax := RowAxis(n.Type.Shape)
	if ax < 0 {
		return false
	}
	if _, ok := n.Attrs["axis"]; ok {
		a := int(n.Attrs.Int("axis", -1))
		if a < 0 {
			a += n.Type.Shape.Rank()
		}
		if a <= ax {
			return false // along the rows (or the batch)
		}
	}
	if n.Op == "reshape" && (len(n.Args) != 1 || RowAxis(n.Args[0].Type.Shape) < 0) {
		return false
	}
	for i, a := range n.Args {
		if _, special := uses[i]; special {
			continue
		}
		if ax := RowAxis(a.Type.Shape); ax < 0 && hasRowSym(a.Type.Shape) {
			return false // positions laid out otherwise
		}
	}
	return true
}

// RowArg is how row op n reads argument i.
func RowArg(n *Node, i int) RowUse {
	if u, ok := rowOps[n.Op][i]; ok {
		return u
	}
	return RowAligned
}

// RowView reports whether the CPU kernels of row op n return a view of
// its argument (nothing to compute; an executor runs it on every row).
func RowView(n *Node) bool { return n.Op == "reshape" || n.Op == "probe" }

func hasRowSym(s Shape) bool {
	for _, d := range s {
		if d.Sym != "" && d.Sym != "B" && d.Sym != "M" {
			for _, c := range d.Sym {
				if c == 'S' {
					return true
				}
			}
		}
	}
	return false
}
