package backends

import "github.com/ds4go/ds4/ir"

// Bounded replay on host devices (Env.Replay): a node the pass
// passes.BoundedRows gave the attribute rows is computed on the call's
// last rows it needs only, its row-aligned arguments (ir.RowArg) viewed
// from the first of them and start_pos moved with them, and its result
// laid back at those rows of a value of the call's full shape.

// replayNode is what Launch needs of one node for a bounded replay,
// derived once by Prepare.
type replayNode struct {
	rows    int   // the attribute rows (0: every row)
	outAxis int   // the result's row axis
	argAxis []int // each argument's row axis, -1 for one read whole
	start   []bool
}

func replayOf(n *ir.Node) replayNode {
	k, ok := n.Attrs["rows"].(int64)
	if !ok || k <= 0 || !ir.RowOp(n) || ir.RowView(n) {
		return replayNode{}
	}
	r := replayNode{rows: int(k), outAxis: ir.RowAxis(n.Type.Shape), argAxis: make([]int, len(n.Args)), start: make([]bool, len(n.Args))}
	for j, a := range n.Args {
		r.argAxis[j] = -1
		if ir.RowArg(n, j) == ir.RowAligned {
			r.argAxis[j] = ir.RowAxis(a.Type.Shape)
		}
		r.start[j] = a.Op == "input" && a.Attrs.Str("name", "") == "start_pos"
	}
	return r
}

// replayRows is how many of the call's last rows node i computes: env.S
// for every row.
func (r replayNode) replayRows(env *Env) int {
	if !env.Replay || env.B != 1 || r.rows == 0 {
		return env.S
	}
	local := r.rows - env.Tail
	if local >= env.S {
		return env.S
	}
	return max(local, 1)
}

// launchRows runs kernel k on the last local rows of node n's call.
func (r replayNode) launchRows(k HostKernel, env *Env, n *ir.Node, args []*Tensor, local int) (*Tensor, error) {
	lo := env.S - local
	sub := *env
	sub.S, sub.StartPos = local, env.StartPos+lo
	sargs := make([]*Tensor, len(args))
	for j, a := range args {
		switch {
		case r.argAxis[j] >= 0:
			v, ok := rowView(a, r.argAxis[j], lo, env.S)
			if !ok {
				return k(env, n, args) // not laid out by rows: every row
			}
			sargs[j] = v
		case r.start[j] && len(a.I64) == 1:
			sargs[j] = &Tensor{DType: a.DType, Shape: a.Shape, I64: []int64{a.I64[0] + int64(lo)}}
		default:
			sargs[j] = a
		}
	}
	v, err := k(&sub, n, sargs)
	if err != nil {
		return nil, err
	}
	return rowFull(v, r.outAxis, lo, env.S, sargs), nil
}

// rowView is rows lo..S of t along axis ax (every axis before it of size
// 1), sharing t's memory.
func rowView(t *Tensor, ax, lo, S int) (*Tensor, bool) {
	if ax >= len(t.Shape) || t.Shape[ax] != S {
		return nil, false
	}
	for _, d := range t.Shape[:ax] {
		if d != 1 {
			return nil, false
		}
	}
	rs := 1
	for _, d := range t.Shape[ax+1:] {
		rs *= d
	}
	v := &Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...), Scale: t.Scale, Parts: t.Parts}
	v.Shape[ax] = S - lo
	off := lo * rs
	if t.F32 != nil {
		v.F32 = t.F32[off:]
	}
	if t.I64 != nil {
		v.I64 = t.I64[off:]
	}
	if t.I32 != nil {
		v.I32 = t.I32[off:]
	}
	if t.U8 != nil {
		v.U8 = t.U8[off:]
	}
	return v, true
}

// rowFull is v, the rows lo..S of a value along axis ax, as a value of
// all S rows: v's rows are moved to their place in v's own memory when it
// is large enough and not an argument's, else copied to new memory.
func rowFull(v *Tensor, ax, lo, S int, args []*Tensor) *Tensor {
	if ax < 0 || ax >= len(v.Shape) {
		return v
	}
	rs := 1
	for _, d := range v.Shape[ax+1:] {
		rs *= d
	}
	out := &Tensor{DType: v.DType, Shape: append([]int(nil), v.Shape...), Scale: v.Scale, Parts: v.Parts}
	out.Shape[ax] = S
	n, m := S*rs, v.Shape[ax]*rs
	out.F32 = placeRows(v.F32, lo*rs, m, n, func(a *Tensor) []float32 { return a.F32 }, args)
	out.I64 = placeRows(v.I64, lo*rs, m, n, func(a *Tensor) []int64 { return a.I64 }, args)
	out.I32 = placeRows(v.I32, lo*rs, m, n, func(a *Tensor) []int32 { return a.I32 }, args)
	out.U8 = placeRows(v.U8, lo*rs, m, n, func(a *Tensor) []byte { return a.U8 }, args)
	return out
}

func placeRows[T any](d []T, off, m, n int, of func(*Tensor) []T, args []*Tensor) []T {
	if d == nil {
		return nil
	}
	own := cap(d) >= n
	for _, a := range args {
		if s := of(a); own && len(s) > 0 && len(d) > 0 && &s[0] == &d[0] {
			own = false // a view of an argument: never written over
		}
	}
	var full []T
	if own {
		full = d[:n]
	} else {
		full = make([]T, n)
	}
	copy(full[off:off+m], d[:m])
	return full
}
