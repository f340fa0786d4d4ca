package ir

import (
	"math"
	"strings"
	"testing"
)

// verifyBase builds a small valid decode graph and returns it with its nodes.
func verifyBase() (*Graph, map[string]*Node) {
	g := NewGraph("decode")
	n := map[string]*Node{}
	n["x"] = g.Source("input", T(BF16, "B", 1, 64), Attrs{"name": "x"})
	n["pos"] = g.Source("input", T(I64), Attrs{"name": "start_pos"})
	n["w"] = g.Source("weight", T(F8E4M3, 128, 64), Attrs{"name": "w", "format": "fp8"})
	n["ring"] = g.Source("state", T(BF16, "B", 8, 64), Attrs{"name": "ring", "kind": "window"})
	n["mm"] = g.Add("matmul_fp8", nil, n["x"], n["w"])
	n["r1"] = g.Add("window_update", nil, n["ring"], n["x"], n["pos"])
	n["r2"] = g.Add("window_update", nil, n["r1"], n["x"], n["pos"])
	g.SetOutput("y", n["mm"])
	g.SetOutput("ring", n["r2"])
	return g, n
}

func TestVerifyOK(t *testing.T) {
	g, _ := verifyBase()
	if err := Verify(g); err != nil {
		t.Fatal(err)
	}
	if err := VerifyModule(&Module{Graphs: []*Graph{g}}); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(g *Graph, n map[string]*Node)
		want   string
	}{
		{"unknown op", func(g *Graph, n map[string]*Node) { n["mm"].Op = "matmull" },
			`graph decode: %4 (matmull): unknown op "matmull"`},
		{"arity", func(g *Graph, n map[string]*Node) { n["mm"].Args = n["mm"].Args[:1] },
			`graph decode: %4 (matmul_fp8): takes 2 arguments, got 1`},
		{"nil arg", func(g *Graph, n map[string]*Node) { n["mm"].Args[1] = nil },
			`graph decode: %4 (matmul_fp8): argument 1 is nil`},
		{"source with args", func(g *Graph, n map[string]*Node) { n["w"].Args = []*Node{n["x"]} },
			`graph decode: %2 (weight): takes 0 arguments, got 1`},
		{"missing attribute", func(g *Graph, n map[string]*Node) { delete(n["w"].Attrs, "format") },
			`graph decode: %2 (weight): missing attribute "format"`},
		{"unknown attribute", func(g *Graph, n map[string]*Node) { n["mm"].Attrs["bias"] = true },
			`graph decode: %4 (matmul_fp8): unknown attribute "bias"`},
		{"attribute kind", func(g *Graph, n map[string]*Node) { n["w"].Attrs["layer"] = "2" },
			`graph decode: %2 (weight): attribute "layer": want int, got string "2"`},
		{"attribute Go type", func(g *Graph, n map[string]*Node) { n["w"].Attrs["layer"] = 2 },
			`graph decode: %2 (weight): attribute "layer" holds a Go int, want int`},
		{"use before def", func(g *Graph, n map[string]*Node) { g.Nodes[4], g.Nodes[1] = g.Nodes[1], g.Nodes[4] },
			`graph decode: %4 (matmul_fp8): argument 1 (%2) is used before its definition`},
		{"foreign node", func(g *Graph, n map[string]*Node) {
			o := NewGraph("other")
			n["mm"].Args[1] = o.Source("weight", T(F8E4M3, 128, 64), Attrs{"name": "w", "format": "fp8"})
		}, `graph decode: %4 (matmul_fp8): argument 1 (%0 weight) is not a node of this graph`},
		{"duplicate id", func(g *Graph, n map[string]*Node) { n["mm"].ID = 2 },
			`graph decode: %2 (matmul_fp8): duplicate node id`},
		{"node twice", func(g *Graph, n map[string]*Node) { g.Nodes = append(g.Nodes, n["mm"]) },
			`graph decode: %4 (matmul_fp8): node appears twice in the graph`},
		{"nil node", func(g *Graph, n map[string]*Node) { g.Nodes[3] = nil },
			`graph decode: node 3 is nil`},
		{"type mismatch", func(g *Graph, n map[string]*Node) { n["mm"].Type = T(BF16, "B", 1, 64) },
			`graph decode: %4 (matmul_fp8): type bf16[B,1,64] but rule gives bf16[B,1,128]`},
		{"rule error", func(g *Graph, n map[string]*Node) { n["mm"].Args[0] = n["pos"] },
			`graph decode: %4 (matmul_fp8): argument 0: dtype i64 not allowed`},
		{"source type", func(g *Graph, n map[string]*Node) { n["x"].Type = Type{} },
			`graph decode: %0 (input): source needs a declared type`},
		{"state arg not state", func(g *Graph, n map[string]*Node) { n["r1"].Args[0] = n["x"]; n["r1"].Type = n["x"].Type },
			`graph decode: %5 (window_update): argument 0 (%0 input) is not a state value`},
		{"state arg is input", func(g *Graph, n map[string]*Node) {
			n["ring"].Op = "input"
			n["ring"].Attrs = Attrs{"name": "ring"}
		}, `graph decode: %5 (window_update): argument 0 (%3 input) is not a state value`},
		{"state updated twice", func(g *Graph, n map[string]*Node) { n["r2"].Args[0] = n["ring"] },
			`graph decode: %6 (window_update): state version %3 is already updated by %5`},
		{"state read after update", func(g *Graph, n map[string]*Node) {
			// The probe reads ring %3 after %5 wrote it in place.
			g.Append(&Node{Op: "probe", Args: []*Node{n["ring"]}, Attrs: Attrs{"name": "p"}, Type: n["ring"].Type})
		}, `graph decode: %7 (probe): argument 0 reads state version %3 after %5 updated it in place`},
		{"nan attribute", func(g *Graph, n map[string]*Node) {
			g.Append(&Node{Op: "mul_scalar", Args: []*Node{n["mm"]}, Attrs: Attrs{"value": math.NaN()}, Type: n["mm"].Type})
		}, `graph decode: %7 (mul_scalar): attribute "value": NaN is not finite`},
		{"infinite epsilon", func(g *Graph, n map[string]*Node) {
			g.Append(&Node{Op: "add_scalar", Args: []*Node{n["mm"]}, Attrs: Attrs{"value": math.Inf(-1)}, Type: n["mm"].Type})
		}, `graph decode: %7 (add_scalar): attribute "value": -Inf is not finite`},
		{"nan clamp bound", func(g *Graph, n map[string]*Node) {
			g.Append(&Node{Op: "clamp", Args: []*Node{n["mm"]}, Attrs: Attrs{"hi": math.NaN()}, Type: n["mm"].Type})
		}, `graph decode: %7 (clamp): attribute "hi": NaN is not finite`},
		{"infinite constant", func(g *Graph, n map[string]*Node) {
			g.Source("const", T(F32, 2), Attrs{"floats": []float64{1, math.Inf(1)}})
		}, `graph decode: %7 (const): attribute "floats": element 1 is +Inf, not finite`},
		{"rope dim zero", func(g *Graph, n map[string]*Node) {
			g.Append(&Node{Op: "rope_table", Attrs: Attrs{"dim": int64(0), "base": 1e4, "factor": 1.0, "original_seq_len": int64(0), "beta_fast": 32.0, "beta_slow": 1.0}, Type: T(F32, "M", 0, 2)})
		}, `graph decode: %7 (rope_table): dim 0 must be positive and even`},
		{"rope table type", func(g *Graph, n map[string]*Node) {
			g.Append(&Node{Op: "rope_table", Attrs: Attrs{"dim": int64(16), "base": 1e4, "factor": 1.0, "original_seq_len": int64(0), "beta_fast": 32.0, "beta_slow": 1.0}, Type: T(F32, "M", 4, 2)})
		}, `graph decode: %7 (rope_table): declared f32[M,4,2], want f32[M,8,2] for dim 16`},
		{"rope negative base", func(g *Graph, n map[string]*Node) {
			g.Append(&Node{Op: "rope_table", Attrs: Attrs{"dim": int64(16), "base": -1.0, "factor": 1.0, "original_seq_len": int64(0), "beta_fast": 32.0, "beta_slow": 1.0}, Type: T(F32, "M", 8, 2)})
		}, `graph decode: %7 (rope_table): base -1 and factor 1 must be positive`},
		{"output foreign", func(g *Graph, n map[string]*Node) {
			g.SetOutput("z", NewGraph("o").Source("input", T(F32), Attrs{"name": "z"}))
		}, `graph decode: output z (%0 input) is not a node of this graph`},
		{"output nil", func(g *Graph, n map[string]*Node) { g.SetOutput("z", nil) },
			`graph decode: output z is nil`},
		{"output duplicate", func(g *Graph, n map[string]*Node) { g.SetOutput("y", n["r1"]) },
			`graph decode: duplicate output name y`},
		{"rank guard", func(g *Graph, n map[string]*Node) {
			n["mm"].Op = "grouped_matmul"
			n["mm"].Attrs = Attrs{"groups": int64(1)}
			n["x"].Type = T(BF16)
			n["w"].Attrs["format"] = "bf16"
			n["w"].Type = T(BF16, 4, 0)
		}, `graph decode: %4 (grouped_matmul): argument 0: want rank ≥ 1, got bf16[]`},
	}
	for _, c := range cases {
		g, n := verifyBase()
		c.mutate(g, n)
		err := Verify(g)
		if err == nil {
			t.Errorf("%s: Verify accepted\n%s", c.name, FormatGraph(g))
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error\n  %v\nwant prefix\n  %s", c.name, err, c.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", c.name, err)
		}
	}
}

// TestVerifyClampInfinity: a clamp bound may be ±Inf (no bound), the one
// float attribute that may.
func TestVerifyClampInfinity(t *testing.T) {
	g, n := verifyBase()
	g.Append(&Node{Op: "clamp", Args: []*Node{n["mm"]}, Attrs: Attrs{"lo": math.Inf(-1), "hi": 448.0}, Type: n["mm"].Type})
	if err := Verify(g); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyModuleErrors(t *testing.T) {
	g1, _ := verifyBase()
	g2, _ := verifyBase()
	if err := VerifyModule(&Module{Graphs: []*Graph{g1, g2}}); err == nil || err.Error() != "module: duplicate graph name decode" {
		t.Errorf("duplicate graphs: %v", err)
	}
	if err := VerifyModule(&Module{Graphs: []*Graph{nil}}); err == nil {
		t.Errorf("nil graph accepted")
	}
	g2.Name = "prefill"
	g2.Nodes[4].Type = T(F32)
	if err := VerifyModule(&Module{Graphs: []*Graph{g1, g2}}); err == nil || !strings.HasPrefix(err.Error(), "graph prefill: %4 (matmul_fp8): type f32[]") {
		t.Errorf("bad second graph: %v", err)
	}
	if Verify(nil) == nil || VerifyModule(nil) == nil {
		t.Errorf("nil accepted")
	}
}

// TestInferGuards checks that the inputs which would make a rule in ops.go
// panic are rejected before the rule runs.
func TestInferGuards(t *testing.T) {
	for _, text := range []string{
		`graph g {
  %0 = input {name="h"} : i64[B,M]
  %1 = input {name="t"} : i64[S]
  %2 = input {name="p"} : i64[]
  %4 = input {name="pad"} : i64[1]
  %3 = engram_hash(%0, %1, %2, %4) {heads=1, multipliers=[1,2], offsets=[0], primes=[7]} : i64[B,S,1]
}`,
		`graph g {
  %0 = input {name="x"} : bf16[]
  %1 = input {name="w"} : bf16[4,0]
  %2 = grouped_matmul(%0, %1) {groups=1} : bf16[4]
}`,
	} {
		if _, err := Parse(text); err == nil {
			t.Errorf("accepted:\n%s", text)
		} else if !strings.Contains(err.Error(), "argument") {
			t.Errorf("error %v", err)
		}
	}
}

// TestVerifyConstCountSaturates: an element count past int64 is not taken
// modulo 2^64 (7 × 7905747460161236407 wraps to 1), so a const of such a
// shape with one value is refused.
func TestVerifyConstCountSaturates(t *testing.T) {
	g := NewGraph("g")
	c := g.Append(&Node{Op: "const", Attrs: Attrs{"floats": []float64{1}}, Type: T(F32, 7, 7905747460161236407)})
	g.SetOutput("y", c)
	err := Verify(g)
	if err == nil || !strings.Contains(err.Error(), "const has 1 values") {
		t.Fatalf("Verify: %v, want the value count refused", err)
	}
}
