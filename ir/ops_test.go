package ir

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// opCase is one shape-rule case: the op applied to sources of the given
// argument types (or, for source ops, declaring decl) must infer want.
// Each op also needs at least one failing variant: badArgs replaces the
// argument types, badAttrs is merged over attrs, badDecl replaces decl.
type opCase struct {
	op    string
	attrs Attrs
	args  []Type
	decl  Type // source ops
	want  Type

	badArgs  []Type
	badAttrs Attrs
	badDecl  *Type
}

// neverFails lists ops whose rule accepts every well-formed argument, with
// the reason.
var neverFails = map[string]string{
	"probe": "identity on any value",
}

func mergeAttrs(a, b Attrs) Attrs {
	out := Attrs{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

var (
	f32  = func(d ...any) Type { return T(F32, d...) }
	bf16 = func(d ...any) Type { return T(BF16, d...) }
	i64  = func(d ...any) Type { return T(I64, d...) }
	i32  = func(d ...any) Type { return T(I32, d...) }
	u8   = func(d ...any) Type { return T(U8, d...) }
	f8   = func(d ...any) Type { return T(F8E4M3, d...) }
	fp4  = func(d ...any) Type { return T(FP4E2M1, d...) }
)

func opCases() []opCase {
	unary := []string{"sigmoid", "silu", "rsqrt", "sqrt", "softplus", "exp", "relu"}
	cs := []opCase{
		// Sources.
		{op: "input", attrs: Attrs{"name": "tokens"}, decl: i64("B", "S"), want: i64("B", "S"), badDecl: &Type{}},
		{op: "input", attrs: Attrs{"name": "start_pos"}, decl: i64(), want: i64()},
		{op: "weight", attrs: Attrs{"name": "layers.2.attn.wq_a", "format": "fp8", "layer": int64(2)}, decl: f8(128, 64), want: f8(128, 64), badAttrs: Attrs{"format": "bf16"}},
		{op: "weight", attrs: Attrs{"name": "norm", "format": "bf16"}, decl: bf16(64), want: bf16(64), badDecl: &Type{BF16, Dims("D")}},
		{op: "const", attrs: Attrs{"ints": []int64{1, 2, 3}}, decl: i64(3), want: i64(3), badDecl: &Type{I64, Dims(4)}},
		{op: "const", attrs: Attrs{"floats": []float64{0.5, -1}}, decl: f32(2), want: f32(2)},
		{op: "state", attrs: Attrs{"name": "kv", "kind": "window"}, decl: bf16("B", 128, 64), want: bf16("B", 128, 64), badDecl: &Type{}},
		{op: "rope_table", attrs: Attrs{"dim": int64(64), "base": 10000.0, "factor": 4.0, "original_seq_len": int64(4096), "beta_fast": 32.0, "beta_slow": 1.0},
			decl: f32("M", 32, 2), want: f32("M", 32, 2), badDecl: &Type{}},

		// Elementwise.
		{op: "cast", attrs: Attrs{"to": "f32"}, args: []Type{bf16("B", "S", 64)}, want: f32("B", "S", 64), badAttrs: Attrs{"to": "i64"}},
		{op: "cast", attrs: Attrs{"to": "bf16"}, args: []Type{f32(4)}, want: bf16(4), badArgs: []Type{i64(4)}},
		{op: "clamp", attrs: Attrs{"lo": -1.0, "hi": 1.0}, args: []Type{f32("B", 4)}, want: f32("B", 4), badArgs: []Type{i64("B", 4)}},
		{op: "add_scalar", attrs: Attrs{"value": 1.5}, args: []Type{bf16("B", 4)}, want: bf16("B", 4), badArgs: []Type{u8("B", 4)}},
		{op: "mul_scalar", attrs: Attrs{"value": -2.0}, args: []Type{bf16("B", 4)}, want: bf16("B", 4), badArgs: []Type{i32("B", 4)}},
		{op: "mask_fill", args: []Type{f32("B", "S", "T"), u8("B", "S", "T")}, want: f32("B", "S", "T"), badArgs: []Type{f32("B", "S", "T"), u8("B", "S", 4)}},
		{op: "mask_fill", args: []Type{f32(2), T(Bool, 2)}, want: f32(2), badArgs: []Type{f32(2), f32(2)}},
		{op: "act_quant", attrs: Attrs{"block": int64(128)}, args: []Type{bf16("B", "S", 256)}, want: bf16("B", "S", 256), badArgs: []Type{bf16("B", "S", 100)}},
		{op: "act_quant", attrs: Attrs{"block": int64(128)}, args: []Type{bf16("B", "D")}, want: bf16("B", "D"), badArgs: []Type{f32("B", "D")}, badAttrs: Attrs{"block": int64(0)}},
		{op: "fp4_quant", attrs: Attrs{"block": int64(32), "scale": "e8m0"}, args: []Type{bf16("B", 64)}, want: bf16("B", 64), badAttrs: Attrs{"scale": "e5m2"}},

		// Reductions.
		{op: "mean_sq", attrs: Attrs{"axis": int64(-1)}, args: []Type{f32("B", "S", 64)}, want: f32("B", "S", 1), badArgs: []Type{i64("B", "S", 64)}},
		{op: "mean_sq", args: []Type{f32("B", 64)}, want: f32("B", 1), badArgs: []Type{f32()}},
		{op: "sum", attrs: Attrs{"axis": int64(1), "keepdim": false}, args: []Type{f32("B", "S", 64)}, want: f32("B", 64), badAttrs: Attrs{"axis": int64(3)}},
		{op: "sum", attrs: Attrs{"axis": int64(-3), "keepdim": true}, args: []Type{f32("B", "S", 64)}, want: f32(1, "S", 64), badAttrs: Attrs{"axis": int64(-4)}},
		{op: "softmax", attrs: Attrs{"axis": int64(-1)}, args: []Type{f32("B", "H", "T")}, want: f32("B", "H", "T"), badArgs: []Type{i64("B", "H", "T")}},

		// Shape.
		{op: "reshape", attrs: Attrs{"shape": "[B,S,4,16]"}, args: []Type{bf16("B", "S", 64)}, want: bf16("B", "S", 4, 16), badAttrs: Attrs{"shape": "[B,S,4,15]"}},
		{op: "reshape", attrs: Attrs{"shape": "[B,S]"}, args: []Type{bf16("B", "S", 1)}, want: bf16("B", "S"), badAttrs: Attrs{"shape": "[B,S,2]"}},
		{op: "reshape", attrs: Attrs{"shape": "[8]"}, args: []Type{bf16(2, 4)}, want: bf16(8), badAttrs: Attrs{"shape": "8"}},
		{op: "slice", attrs: Attrs{"axis": int64(2), "start": int64(0), "end": int64(32)}, args: []Type{bf16("B", "S", 64)}, want: bf16("B", "S", 32), badAttrs: Attrs{"end": int64(65)}},
		{op: "slice", attrs: Attrs{"axis": int64(-1), "start": int64(32), "end": int64(64)}, args: []Type{bf16("B", "S", 64)}, want: bf16("B", "S", 32), badAttrs: Attrs{"start": int64(64)}},
		{op: "last", attrs: Attrs{"axis": int64(1)}, args: []Type{bf16("B", "S", 64)}, want: bf16("B", 1, 64), badAttrs: Attrs{"axis": int64(3)}},
		{op: "concat", attrs: Attrs{"axis": int64(-1)}, args: []Type{bf16("B", "S", 32), bf16("B", "S", 16)}, want: bf16("B", "S", 48), badArgs: []Type{bf16("B", "S", 32), f32("B", "S", 16)}},
		{op: "concat", attrs: Attrs{"axis": int64(1)}, args: []Type{bf16("B", "S", 8), bf16("B", "P", 8), bf16("B", 2, 8)}, want: bf16("B", "S+P+2", 8), badArgs: []Type{bf16("B", "S", 8), bf16("B", "S", 4)}},
		{op: "expand", attrs: Attrs{"axis": int64(2), "n": int64(4)}, args: []Type{bf16("B", "S", 64)}, want: bf16("B", "S", 4, 64), badAttrs: Attrs{"n": int64(0)}},
		{op: "expand", attrs: Attrs{"axis": int64(1), "n": int64(2)}, args: []Type{bf16("B")}, want: bf16("B", 2), badAttrs: Attrs{"axis": int64(2)}},

		// Gathers and selections.
		{op: "embed", args: []Type{bf16(1000, 64), i64("B", "S")}, want: bf16("B", "S", 64), badArgs: []Type{bf16(1000, 64), f32("B", "S")}},
		{op: "embed", args: []Type{f32(10, 4), i64(3)}, want: f32(3, 4), badArgs: []Type{f32(10, 4), i32(3)}}, // i64 ids only: every kernel reads int64 ids
		{op: "token_map", args: []Type{i64(1000), i64("B", "S")}, want: i64("B", "S"), badArgs: []Type{i64(10, 10), i64("B", "S")}},
		{op: "gather", args: []Type{f32("N", 8), i64("N", 2)}, want: f32("N", 2), badArgs: []Type{f32("N", 8), i64("M", 2)}},
		{op: "topk_idx", attrs: Attrs{"k": int64(2)}, args: []Type{f32("N", 8)}, want: i64("N", 2), badAttrs: Attrs{"k": int64(9)}},

		// Linear algebra.
		{op: "matmul", args: []Type{bf16("B", "S", 64), bf16(128, 64)}, want: bf16("B", "S", 128), badArgs: []Type{bf16("B", "S", 64), bf16(128, 32)}},
		{op: "matmul", args: []Type{f32(4), f32(3, 4)}, want: f32(3), badArgs: []Type{f32(4), bf16(3, 4)}},
		{op: "matmul_fp8", args: []Type{bf16("B", "S", 64), f8(128, 64)}, want: bf16("B", "S", 128), badArgs: []Type{bf16("B", "S", 64), fp4(128, 64)}},
		{op: "matmul_fp4", args: []Type{bf16("B", "S", 64), fp4(128, 64)}, want: bf16("B", "S", 128), badArgs: []Type{bf16("B", "S", 64), f8(128, 64)}},
		{op: "grouped_matmul", attrs: Attrs{"groups": int64(4)}, args: []Type{bf16("B", "S", 64), bf16(32, 16)}, want: bf16("B", "S", 32), badAttrs: Attrs{"groups": int64(3)}},
		{op: "expert_matmul", args: []Type{bf16("N", 64), fp4(8, 128, 64), i64("N", 2)}, want: bf16("N", 2, 128), badArgs: []Type{bf16("N", 64), bf16(8, 128, 64), i64("N", 2)}},
		{op: "expert_matmul", args: []Type{bf16("N", 2, 64), f8(8, 128, 64), i64("N", 2)}, want: bf16("N", 2, 128), badArgs: []Type{bf16("N", 3, 64), f8(8, 128, 64), i64("N", 2)}},
		{op: "moe_combine", args: []Type{bf16("N", 2, 64), f32("N", 2)}, want: f32("N", 64), badArgs: []Type{bf16("N", 2, 64), f32("N", 3)}},

		// Normalisation and hyper-connections.
		{op: "rmsnorm", attrs: Attrs{"eps": 1e-6}, args: []Type{bf16("B", "S", 64), f32(64)}, want: bf16("B", "S", 64), badArgs: []Type{bf16("B", "S", 64), f32(32)}},
		{op: "hc_pre", args: []Type{bf16("B", "S", 4, 64), f32("B", "S", 4)}, want: bf16("B", "S", 64), badArgs: []Type{bf16("B", "S", 4, 64), f32("B", "S", 3)}},
		{op: "hc_post", args: []Type{bf16("B", "S", 64), bf16("B", "S", 4, 64), f32("B", "S", 4), f32("B", "S", 4, 4)}, want: bf16("B", "S", 4, 64),
			badArgs: []Type{bf16("B", "S", 64), bf16("B", "S", 4, 64), f32("B", "S", 4), f32("B", "S", 4, 3)}},

		// Positions and RoPE.
		{op: "positions", attrs: Attrs{"ratio": int64(1)}, args: []Type{i64("B", "S"), i64()}, want: i64("S"), badAttrs: Attrs{"ratio": int64(0)}},
		{op: "positions", attrs: Attrs{"ratio": int64(4)}, args: []Type{i64("B", "S"), i64()}, want: i64("(P+S)/4-P/4"), badArgs: []Type{i64("B", "S"), i64(1)}},
		{op: "positions", attrs: Attrs{"ratio": int64(4)}, args: []Type{i64("B", 1), i64()}, want: i64("(P+1)/4-P/4")},
		{op: "rope", attrs: Attrs{"dim": int64(64)}, args: []Type{bf16("B", "S", 8, 128), f32("M", 32, 2), i64("S")}, want: bf16("B", "S", 8, 128), badAttrs: Attrs{"dim": int64(63)}},
		{op: "rope", attrs: Attrs{"dim": int64(64), "inverse": true}, args: []Type{bf16("B", "S", 64), f32("M", 32, 2), i64("S")}, want: bf16("B", "S", 64),
			badArgs: []Type{bf16("B", "S", 64), f32("M", 32, 2), i64("T")}},

		// Attention.
		{op: "window_idx", attrs: Attrs{"window": int64(128), "phase": "prefill"}, args: []Type{i64("B", "S"), i64()}, want: i32("B", "S", "min(S,128)"), badAttrs: Attrs{"phase": "train"}},
		{op: "window_idx", attrs: Attrs{"window": int64(128), "phase": "prefill"}, args: []Type{i64("B", 16), i64()}, want: i32("B", 16, 16)},
		{op: "window_idx", attrs: Attrs{"window": int64(128), "phase": "decode"}, args: []Type{i64("B", 1), i64()}, want: i32("B", 1, 128), badArgs: []Type{i64("B", 2), i64()}},
		{op: "window_update", args: []Type{bf16("B", 128, 64), bf16("B", "S", 64), i64()}, want: bf16("B", 128, 64), badArgs: []Type{bf16("B", 128, 64), bf16("B", "S", 32), i64()}},
		{op: "sparse_attn", attrs: Attrs{"scale": 0.125}, args: []Type{bf16("B", "S", 8, 64), bf16("B", "N", 64), f32(8), i32("B", "S", "T")}, want: bf16("B", "S", 8, 64),
			badArgs: []Type{bf16("B", "S", 8, 64), bf16("B", "N", 64), f32(8), i64("B", "S", "T")}},
		{op: "group_state_update", attrs: Attrs{"ratio": int64(4)}, args: []Type{f32("B", 4, 64), f32("B", "S", 64), i64()}, want: f32("B", 4, 64), badAttrs: Attrs{"ratio": int64(8)}},
		{op: "compressor_pool", attrs: Attrs{"ratio": int64(4)}, args: []Type{f32("B", "S", 64), f32("B", "S", 64), f32(4, 64), f32("B", 4, 64), i64()}, want: f32("B", "(P+S)/4-P/4", 64),
			badAttrs: Attrs{"ratio": int64(1)}},
		{op: "cache_write", attrs: Attrs{"ratio": int64(4)}, args: []Type{bf16("B", "M/4", 64), bf16("B", "G", 64), i64()}, want: bf16("B", "M/4", 64), badArgs: []Type{bf16("B", "M/4", 64), bf16("B", "G", 32), i64()}},
		{op: "cache_read", attrs: Attrs{"ratio": int64(4)}, args: []Type{bf16("B", "M/4", 64), i64("B", "S"), i64()}, want: bf16("B", "(P+S)/4", 64), badArgs: []Type{bf16("B", "M/4", 64), i64("S"), i64()}},
		{op: "cache_read", attrs: Attrs{"ratio": int64(1)}, args: []Type{bf16("B", "M", 64), i64("B", 1), i64()}, want: bf16("B", "P+1", 64)},
		{op: "index_score", args: []Type{bf16("B", "S", 4, 32), bf16("B", "N", 32), bf16("B", "S", 4)}, want: bf16("B", "S", "N"), badArgs: []Type{bf16("B", "S", 4, 32), bf16("B", "N", 16), bf16("B", "S", 4)}},
		{op: "index_mask", attrs: Attrs{"ratio": int64(4)}, args: []Type{bf16("B", "S", "N"), i64()}, want: bf16("B", "S", "N"), badArgs: []Type{bf16("S", "N"), i64()}},
		{op: "candidate_blocks", attrs: Attrs{"ratio": int64(4), "topk_blocks": int64(8), "block": int64(64)}, args: []Type{bf16("B", "S", "N"), i64()}, want: u8("B", "S", "N"), badAttrs: Attrs{"block": int64(0)}},
		{op: "index_topk", attrs: Attrs{"ratio": int64(4), "k": int64(512)}, args: []Type{bf16("B", "S", "N"), i64(), bf16("B", "W", 64)}, want: i32("B", "S", "min(512,N)"), badAttrs: Attrs{"k": int64(0)}},

		// Engram.
		{op: "engram_hist_update", args: []Type{i64("B", "M"), i64("B", "S"), i64()}, want: i64("B", "M"), badArgs: []Type{i64("B", "M"), f32("B", "S"), i64()}},
		{op: "engram_hash", attrs: Attrs{"multipliers": []int64{3, 5, 7}, "primes": []int64{11, 13, 17, 19}, "offsets": []int64{0, 11, 24, 41}, "heads": int64(2)},
			args: []Type{i64("B", "M"), i64("B", "S"), i64(), i64(1)}, want: i64("B", "S", 4), badAttrs: Attrs{"primes": []int64{11, 13, 17}}},
		{op: "engram_lookup", args: []Type{f8(1000, 32), i64("B", "S", 4)}, want: bf16("B", "S", 128), badArgs: []Type{bf16(1000, 32), i64("B", "S", 4)}},
		{op: "engram_gate", attrs: Attrs{"eps": 1e-6}, args: []Type{bf16("B", "S", 4, 64), bf16("B", "S", 4, 64), bf16("B", "S", 64), f32(4, 64)}, want: bf16("B", "S", 4, 64),
			badArgs: []Type{bf16("B", "S", 4, 64), bf16("B", "S", 4, 64), bf16("B", "S", 64), f32(4, 32)}},

		// Observation.
		{op: "probe", attrs: Attrs{"name": "h0", "force": true}, args: []Type{f32("B", 4)}, want: f32("B", 4)},

		// Fused.
		{op: "hc_mix", attrs: Attrs{"eps": 1e-6}, args: []Type{bf16("B", "S", 4, 64), f32(24, 256)}, want: f32("B", "S", 24), badArgs: []Type{bf16("B", "S", 4, 64), f32(24, 255)}},
		{op: "hc_split_sinkhorn", attrs: Attrs{"hc": int64(4), "iters": int64(20), "eps": 1e-6}, args: []Type{f32("B", "S", 24), f32(24), f32(3)}, want: f32("B", "S", 24), badAttrs: Attrs{"hc": int64(3)}},
		{op: "swiglu_clamp", attrs: Attrs{"limit": 7.0}, args: []Type{f32("N", 64), f32("N", 64)}, want: bf16("N", 64), badArgs: []Type{f32("N", 64), bf16("N", 64)}},
		{op: "swiglu_clamp", attrs: Attrs{"limit": 7.0}, args: []Type{f32("N", 64), f32("N", 64), f32("N", 1)}, want: bf16("N", 64), badArgs: []Type{f32("N", 64), f32("N", 32), f32("N", 1)}},
	}
	for _, u := range unary {
		cs = append(cs, opCase{op: u, args: []Type{f32("B", 4)}, want: f32("B", 4), badArgs: []Type{i64("B", 4)}})
	}
	for _, b := range []string{"add", "sub", "mul", "div"} {
		cs = append(cs,
			opCase{op: b, args: []Type{bf16("B", "S", 64), bf16(1, 64)}, want: bf16("B", "S", 64), badArgs: []Type{bf16("B", "S", 64), bf16("B", "S", 32)}},
			opCase{op: b, args: []Type{f32(64), f32("B", 1)}, want: f32("B", 64), badArgs: []Type{f32(64), bf16(64)}},
		)
	}
	return cs
}

// sourceFor adds a source node of type t for argument i of op.
func sourceFor(g *Graph, op string, i int, t Type) *Node {
	if i == 0 && Ops[op].Has(StateUpdate) {
		return g.Source("state", t, Attrs{"name": fmt.Sprintf("%s.s%d", op, i), "kind": "test"})
	}
	return g.Source("input", t, Attrs{"name": fmt.Sprintf("a%d", i)})
}

// caseNode builds the node of a case into g without checking it.
func caseNode(g *Graph, c opCase, args []Type, attrs Attrs, decl Type) *Node {
	n := &Node{Op: c.op, Attrs: attrs, Type: decl}
	for i, t := range args {
		n.Args = append(n.Args, sourceFor(g, c.op, i, t))
	}
	return n
}

// caseGraph builds a verified graph holding the case's node as output "y".
func caseGraph(t testing.TB, name string, c opCase) *Graph {
	t.Helper()
	g := NewGraph(name)
	n := caseNode(g, c, c.args, mergeAttrs(c.attrs, nil), c.decl)
	got, err := Ops[c.op].Infer(n)
	if err != nil {
		t.Fatalf("%s: %s: Infer: %v", name, FormatNode(n), err)
	}
	n.Type = got
	g.Append(n)
	g.SetOutput("y", n)
	return g
}

func TestOpShapeRules(t *testing.T) {
	covered := map[string]bool{}
	hasBad := map[string]bool{}
	for i, c := range opCases() {
		info := Ops[c.op]
		if info == nil {
			t.Errorf("case %d: op %q is not in Ops", i, c.op)
			continue
		}
		covered[c.op] = true
		name := fmt.Sprintf("%s_%d", c.op, i)
		g := caseGraph(t, name, c)
		n := g.Nodes[len(g.Nodes)-1]
		if !n.Type.Equal(c.want) {
			t.Errorf("%s: %s: got %s, want %s", name, FormatNode(n), n.Type, c.want)
		}
		if err := Verify(g); err != nil {
			t.Errorf("%s: Verify: %v", name, err)
		}
		// The failing variants.
		var bads []*Node
		bg := NewGraph(name + "_bad")
		if c.badArgs != nil {
			bads = append(bads, caseNode(bg, c, c.badArgs, mergeAttrs(c.attrs, nil), c.decl))
		}
		if c.badAttrs != nil {
			bads = append(bads, caseNode(bg, c, c.args, mergeAttrs(c.attrs, c.badAttrs), c.decl))
		}
		if c.badDecl != nil {
			bads = append(bads, caseNode(bg, c, c.args, mergeAttrs(c.attrs, nil), *c.badDecl))
		}
		for _, b := range bads {
			hasBad[c.op] = true
			if got, err := info.Infer(b); err == nil {
				t.Errorf("%s: bad variant %s: Infer accepted it, giving %s", name, FormatNode(b), got)
			}
		}
	}
	var missing, noBad []string
	for op := range Ops {
		if !covered[op] {
			missing = append(missing, op)
		}
		if !hasBad[op] && neverFails[op] == "" {
			noBad = append(noBad, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(noBad)
	if len(missing) > 0 {
		t.Errorf("ops without a shape-rule case in opCases: %s", strings.Join(missing, ", "))
	}
	if len(noBad) > 0 {
		t.Errorf("ops without a failing case in opCases: %s", strings.Join(noBad, ", "))
	}
}

func TestOpTableComplete(t *testing.T) {
	for name, info := range Ops {
		if info == nil {
			t.Errorf("%s: nil row", name)
			continue
		}
		if info.Name != name {
			t.Errorf("%s: row is named %q", name, info.Name)
		}
		if info.Infer == nil {
			t.Errorf("%s: no Infer rule", name)
		}
		if strings.TrimSpace(info.Doc) == "" {
			t.Errorf("%s: no Doc", name)
		}
		if info.MinArgs < 0 || (info.MaxArgs != -1 && info.MaxArgs < info.MinArgs) {
			t.Errorf("%s: arity %d..%d", name, info.MinArgs, info.MaxArgs)
		}
		if info.Has(Source) && (info.MinArgs != 0 || info.MaxArgs != 0) {
			t.Errorf("%s: source op with arity %d..%d", name, info.MinArgs, info.MaxArgs)
		}
		if info.Has(StateUpdate) && info.MinArgs < 1 {
			t.Errorf("%s: state update without a state argument", name)
		}
		seen := map[string]bool{}
		for _, a := range info.Attrs {
			if !isIdent(a.Name) || seen[a.Name] {
				t.Errorf("%s: bad or duplicate attribute name %q", name, a.Name)
			}
			seen[a.Name] = true
			if int(a.Kind) >= len(kindNames) {
				t.Errorf("%s: attribute %s has unknown kind %d", name, a.Name, a.Kind)
			}
		}
	}
}

// allOpsModule is a module with one verified graph per shape-rule case.
func allOpsModule(t testing.TB) *Module {
	m := &Module{Meta: map[string]string{"purpose": "every op"}}
	for i, c := range opCases() {
		m.Graphs = append(m.Graphs, caseGraph(t, fmt.Sprintf("%s_%d", c.op, i), c))
	}
	return m
}

func TestAllOpsRoundTrip(t *testing.T) {
	m := allOpsModule(t)
	if err := VerifyModule(m); err != nil {
		t.Fatal(err)
	}
	text := Format(m)
	m2, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := Format(m2); got != text {
		t.Fatalf("round trip differs:\n%s", firstDiff(text, got))
	}
	if err := VerifyModule(m2); err != nil {
		t.Fatal(err)
	}
}

// firstDiff shows the first differing line of two texts.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  want %s\n  got  %s", i+1, x, y)
		}
	}
	return "(no difference)"
}
