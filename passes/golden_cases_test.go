package passes_test

import (
	"testing"

	"github.com/ds4go/ds4/ir"
)

// ---- a tiny builder for hand-made graphs ------------------------------------

type tb struct{ g *ir.Graph }

func newTB() *tb { return &tb{ir.NewGraph("prefill")} }

func (b *tb) in(name string, t ir.Type) *ir.Node {
	return b.g.Source("input", t, ir.Attrs{"name": name})
}
func (b *tb) w(name string, t ir.Type) *ir.Node {
	f := "bf16"
	if t.DType == ir.F32 {
		f = "f32"
	}
	return b.g.Source("weight", t, ir.Attrs{"name": name, "format": f})
}
func (b *tb) op(op string, a ir.Attrs, args ...*ir.Node) *ir.Node { return b.g.Add(op, a, args...) }
func (b *tb) probe(x *ir.Node, name string) *ir.Node {
	return b.op("probe", ir.Attrs{"name": name}, x)
}
func (b *tb) out(n *ir.Node) *ir.Graph { b.g.SetOutput("y", n); return b.g }

func f32(d ...any) ir.Type  { return ir.T(ir.F32, d...) }
func bf16(d ...any) ir.Type { return ir.T(ir.BF16, d...) }

// hcMixes writes hc_mixes + hc_split_sinkhorn as the model builder does,
// with hc copies of width D and the given column/row steps after the
// softmax ("c" column, "r" row).
func (b *tb) hcMixes(h *ir.Node, hc, D int, steps string, eps float64) (pre, post, comb *ir.Node) {
	mix := (2 + hc) * hc
	fn := b.w("fn", f32(mix, hc*D))
	base := b.w("base", f32(mix))
	scale := b.w("scale", f32(3))
	flat := b.op("reshape", ir.Attrs{"shape": ir.Dims("B", "S", hc*D).String()}, b.op("cast", ir.Attrs{"to": "f32"}, h))
	rs := b.op("rsqrt", nil, b.op("add_scalar", ir.Attrs{"value": 1e-20}, b.op("mean_sq", ir.Attrs{"axis": int64(-1)}, flat)))
	m := b.op("mul", nil, b.op("matmul", nil, flat, fn), rs)
	sl := func(x *ir.Node, lo, hi int) *ir.Node {
		return b.op("slice", ir.Attrs{"axis": int64(-1), "start": int64(lo), "end": int64(hi)}, x)
	}
	aff := func(lo, hi, k int) *ir.Node {
		return b.op("add", nil, b.op("mul", nil, sl(m, lo, hi), sl(scale, k, k+1)), sl(base, lo, hi))
	}
	pre = b.op("add_scalar", ir.Attrs{"value": eps}, b.op("sigmoid", nil, aff(0, hc, 0)))
	post = b.op("mul_scalar", ir.Attrs{"value": 2.0}, b.op("sigmoid", nil, aff(hc, 2*hc, 1)))
	c := b.op("reshape", ir.Attrs{"shape": ir.Dims("B", "S", hc, hc).String()}, aff(2*hc, mix, 2))
	c = b.op("add_scalar", ir.Attrs{"value": eps}, b.op("softmax", ir.Attrs{"axis": int64(-1)}, c))
	for _, s := range steps {
		ax := int64(-2)
		if s == 'r' {
			ax = -1
		}
		c = b.op("div", nil, c, b.op("add_scalar", ir.Attrs{"value": eps}, b.op("sum", ir.Attrs{"axis": ax}, c)))
	}
	return b.probe(pre, "L0.hc_attn_pre"), b.probe(post, "L0.hc_attn_post"), b.probe(c, "L0.hc_attn_comb")
}

// sinkhornGraph is one hc mix feeding hc_pre and hc_post as in a block.
func sinkhornGraph(steps string) func() *ir.Graph {
	return func() *ir.Graph {
		b := newTB()
		h := b.in("h", bf16("B", "S", 2, 8))
		y := b.in("y", bf16("B", "S", 8))
		pre, post, comb := b.hcMixes(h, 2, 8, steps, 1e-6)
		x := b.op("hc_pre", nil, h, pre)
		return b.out(b.op("hc_post", nil, b.op("add", nil, x, y), h, post, comb))
	}
}

// swigluGraph writes the builder's clamped SwiGLU; routed adds the routing
// weight; hiG/hiU/loU are the clamp limits.
func swigluGraph(routed bool, hiG, loU, hiU float64) func() *ir.Graph {
	return func() *ir.Graph {
		b := newTB()
		g := b.in("g", bf16("N", 3, 16))
		u := b.in("u", bf16("N", 3, 16))
		gf := b.op("clamp", ir.Attrs{"hi": hiG}, b.op("cast", ir.Attrs{"to": "f32"}, g))
		uf := b.op("clamp", ir.Attrs{"lo": loU, "hi": hiU}, b.op("cast", ir.Attrs{"to": "f32"}, u))
		a := b.op("mul", nil, b.op("silu", nil, gf), uf)
		if routed {
			a = b.op("mul", nil, a, b.in("w", f32("N", 3, 1)))
		}
		return b.out(b.probe(b.op("cast", ir.Attrs{"to": "bf16"}, a), "L0.moe_act"))
	}
}

func goldenCases() []goldenCase {
	return []goldenCase{
		// ---- generic passes ----
		{pass: "dce", name: "basic", build: func() *ir.Graph {
			b := newTB()
			x := b.in("x", bf16("B", "S", 8))
			pos := b.in("start_pos", ir.T(ir.I64))
			w := b.w("w", bf16(8, 8))
			b.w("unused.weight", bf16(8, 8))
			dead := b.op("matmul", nil, x, w)
			b.op("rsqrt", nil, b.op("cast", ir.Attrs{"to": "f32"}, dead))
			ring := b.g.Source("state", bf16("B", 4, 8), ir.Attrs{"name": "ring", "kind": "window"})
			b.op("window_update", nil, ring, b.op("silu", nil, x), pos)
			b.probe(b.op("relu", nil, x), "observed")
			return b.out(b.op("matmul", nil, x, w))
		}, check: wantOps(map[string]int{"matmul": 1, "rsqrt": 0, "weight": 1, "window_update": 1, "probe": 1, "relu": 1})},
		{pass: "cse", name: "basic", build: func() *ir.Graph {
			b := newTB()
			x := b.in("x", bf16("B", "S", 8))
			pos := b.in("start_pos", ir.T(ir.I64))
			w1 := b.w("w", bf16(8, 8))
			w2 := b.w("w", bf16(8, 8))  // the same declaration twice: merged
			w3 := b.w("w2", bf16(8, 8)) // another name: kept
			a := b.op("matmul", nil, b.op("cast", ir.Attrs{"to": "f32"}, x), b.op("cast", ir.Attrs{"to": "f32"}, w1))
			c := b.op("matmul", nil, b.op("cast", ir.Attrs{"to": "f32"}, x), b.op("cast", ir.Attrs{"to": "f32"}, w2))
			d := b.op("matmul", nil, x, w3)
			p1 := b.probe(a, "p")
			p2 := b.probe(a, "p") // probes are never merged
			ring := b.g.Source("state", bf16("B", 4, 8), ir.Attrs{"name": "ring", "kind": "window"})
			r1 := b.op("window_update", nil, ring, x, pos)
			b.op("window_update", nil, r1, x, pos) // state updates are never merged
			s := b.op("add", nil, b.op("add", nil, p1, p2), c)
			return b.out(b.op("add", nil, s, b.op("cast", ir.Attrs{"to": "f32"}, d)))
		}, check: wantOps(map[string]int{"weight": 2, "probe": 2, "window_update": 2, "matmul": 2})},
		{pass: "canonicalize", name: "identities", build: func() *ir.Graph {
			b := newTB()
			x := b.in("x", f32("B", "S", 8))
			y := b.op("mul_scalar", ir.Attrs{"value": 1.0}, x)
			y = b.op("add_scalar", ir.Attrs{"value": 0.0}, y)
			y = b.op("cast", ir.Attrs{"to": "f32"}, y)
			y = b.probe(y, "kept")
			y = b.op("reshape", ir.Attrs{"shape": "[B,S,2,4]"}, y)
			y = b.op("reshape", ir.Attrs{"shape": "[B,S,4,2]"}, y)
			y = b.op("slice", ir.Attrs{"axis": int64(-1), "start": int64(0), "end": int64(2)}, y)
			y = b.op("mul_scalar", ir.Attrs{"value": 2.0}, y) // not an identity
			y = b.op("reshape", ir.Attrs{"shape": "[B,S,8]"}, b.op("reshape", ir.Attrs{"shape": "[B,S,2,4]"}, y))
			return b.out(y)
		}, check: wantOps(map[string]int{"reshape": 2, "mul_scalar": 1, "add_scalar": 0, "cast": 0, "slice": 0, "probe": 1})},
		{pass: "fold-constants", name: "scalars", build: func() *ir.Graph {
			b := newTB()
			x := b.in("x", f32(4))
			c := b.g.Source("const", f32(4), ir.Attrs{"floats": []float64{1, 0, 0, 0}})
			d := b.g.Source("const", f32(4), ir.Attrs{"floats": []float64{0.5, 0.25, 2, 3}})
			e := b.op("mul", nil, b.op("add_scalar", ir.Attrs{"value": 1.0}, c), d)
			e = b.op("cast", ir.Attrs{"to": "bf16"}, b.op("mul_scalar", ir.Attrs{"value": 1.0 / 3}, e))
			e = b.probe(e, "folded")
			return b.out(b.op("add", nil, x, b.op("cast", ir.Attrs{"to": "f32"}, e))) // x is not constant
		}, check: wantOps(map[string]int{"const": 1, "add": 1, "probe": 1, "mul": 0})},

		// ---- fusions ----
		{pass: "fuse-hc-mix", name: "match", build: func() *ir.Graph {
			b := newTB()
			h := b.in("h", bf16("B", "S", 2, 8))
			pre, post, comb := b.hcMixes(h, 2, 8, "crc", 1e-6)
			return b.out(b.op("hc_post", nil, b.op("hc_pre", nil, h, pre), h, post, comb))
		}, check: wantOps(map[string]int{"hc_mix": 1, "mean_sq": 0, "rsqrt": 0, "matmul": 0})},
		{pass: "fuse-hc-mix", name: "other_scale", build: func() *ir.Graph {
			// The scale is the rsqrt of another tensor's mean square: no match.
			b := newTB()
			h := b.in("h", bf16("B", "S", 2, 8))
			o := b.in("o", f32("B", "S", 16))
			fn := b.w("fn", f32(8, 16))
			flat := b.op("reshape", ir.Attrs{"shape": "[B,S,16]"}, b.op("cast", ir.Attrs{"to": "f32"}, h))
			rs := b.op("rsqrt", nil, b.op("add_scalar", ir.Attrs{"value": 1e-20}, b.op("mean_sq", ir.Attrs{"axis": int64(-1)}, o)))
			m1 := b.op("mul", nil, b.op("matmul", nil, flat, fn), rs)
			sg := b.op("sigmoid", nil, b.op("sum", ir.Attrs{"axis": int64(-1)}, flat))
			m2 := b.op("mul", nil, b.op("matmul", nil, flat, fn), sg) // not an rsqrt at all
			return b.out(b.op("add", nil, m1, m2))
		}, check: wantOps(map[string]int{"hc_mix": 0})},
		{pass: "fuse-sinkhorn", name: "match", build: sinkhornGraph("crcrc"),
			check: func(t *testing.T, g *ir.Graph) {
				wantOps(map[string]int{"hc_split_sinkhorn": 1, "div": 0, "sum": 0, "softmax": 0, "sigmoid": 0})(t, g)
				for _, n := range g.Nodes {
					if n.Op == "hc_split_sinkhorn" && n.Attrs.Int("iters", 0) != 3 {
						t.Errorf("iters = %d, want 3", n.Attrs.Int("iters", 0))
					}
				}
				if p := probeNames(g); p != "L0.hc_attn_pre,L0.hc_attn_post,L0.hc_attn_comb" {
					t.Errorf("probes %s", p)
				}
			}},
		{pass: "fuse-sinkhorn", name: "row_last", build: sinkhornGraph("crcr"),
			check: wantOps(map[string]int{"hc_split_sinkhorn": 0})},
		{pass: "fuse-sinkhorn", name: "two_columns", build: sinkhornGraph("ccr"),
			check: wantOps(map[string]int{"hc_split_sinkhorn": 0})},
		{pass: "fuse-swiglu", name: "routed", build: swigluGraph(true, 10, -10, 10),
			check: wantOps(map[string]int{"swiglu_clamp": 1, "clamp": 0, "silu": 0, "mul": 0, "cast": 2})},
		{pass: "fuse-swiglu", name: "shared", build: swigluGraph(false, 7, -7, 7),
			check: wantOps(map[string]int{"swiglu_clamp": 1, "clamp": 0, "silu": 0, "mul": 0})},
		{pass: "fuse-swiglu", name: "limits_differ", build: swigluGraph(true, 10, -8, 8),
			check: wantOps(map[string]int{"swiglu_clamp": 0, "clamp": 2})},
		{pass: "fuse-swiglu", name: "asymmetric", build: swigluGraph(false, 10, -9, 10),
			check: wantOps(map[string]int{"swiglu_clamp": 0})},
	}
}
