package ir

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// attrModule builds a small module that uses every attribute kind, odd
// floats and strings, symbolic dims, non-consecutive IDs and a state chain.
func attrModule() *Module {
	g := NewGraph("prefill")
	tok := g.Source("input", T(I64, "B", "S"), Attrs{"name": "tokens"})
	pos := g.Source("input", T(I64), Attrs{"name": "start_pos"})
	emb := g.Source("weight", T(BF16, 1000, 64), Attrs{"name": "embed", "format": "bf16"})
	w := g.Source("weight", T(F8E4M3, 128, 64), Attrs{"name": "layers.2.attn.wq_a", "format": "fp8", "layer": int64(2), "component": "attn"})
	ci := g.Source("const", T(I64, 3), Attrs{"ints": []int64{-1, 0, math.MaxInt64}})
	cf := g.Source("const", T(F32, 2, 3), Attrs{"floats": []float64{1, -2.5, 1e-300, 1e300, -math.MaxFloat64, 5e-324}})
	ce := g.Source("const", T(F32, 0), Attrs{"floats": []float64{}})
	cei := g.Source("const", T(I64, 0), Attrs{"ints": []int64{}})
	ring := g.Source("state", T(BF16, "B", 128, 64), Attrs{"name": "layers.0.window", "kind": "window"})
	x := g.Add("embed", nil, emb, tok)
	x = g.Add("act_quant", Attrs{"block": int64(64)}, x)
	y := g.Add("matmul_fp8", nil, x, w)
	y = g.Add("clamp", Attrs{"lo": math.Inf(-1), "hi": 448.0}, y)
	y = g.Add("add_scalar", Attrs{"value": math.Copysign(0, -1)}, y)
	y = g.Add("mul_scalar", Attrs{"value": 5e-324}, y)
	y = g.Add("sum", Attrs{"axis": int64(-1), "keepdim": false}, y)
	p := g.Add("probe", Attrs{"name": "weird \"name\"\twith\ttabs, ünïcödé, \x00 and \xff", "force": true}, y)
	p2 := g.Add("probe", Attrs{"name": "} : f32[]", "force": false}, p)
	r1 := g.Add("window_update", nil, ring, x, pos)
	r2 := g.Add("window_update", nil, r1, x, pos)
	wi := g.Add("window_idx", Attrs{"window": int64(128), "phase": "prefill"}, tok, pos)
	g.SetOutput("logits", p2)
	g.SetOutput("ring", r2)
	g.SetOutput("idx", wi)
	g.SetOutput("odd name", ci)
	_, _ = cf, ce
	_ = cei
	// Non-consecutive IDs.
	for i, n := range g.Nodes {
		n.ID = 3 * i
	}
	d := NewGraph("decode graph")
	d.Source("input", T(I64, "B", 1), Attrs{"name": "tokens"})
	return &Module{Meta: map[string]string{"config_fingerprint": "abc", "z": "", "a key": "line\nbreak"}, Graphs: []*Graph{g, d}}
}

func TestRoundTripAttrs(t *testing.T) {
	m := attrModule()
	if err := VerifyModule(m); err != nil {
		t.Fatal(err)
	}
	text := Format(m)
	for _, want := range []string{
		`  meta "a key" = "line\nbreak"`,
		`%0 = input {name="tokens"} : i64[B,S]`,
		`{component="attn", format="fp8", layer=2, name="layers.2.attn.wq_a"} : f8e4m3[128,64]`,
		`{ints=[-1,0,9223372036854775807]} : i64[3]`,
		`{floats=[1.0,-2.5,1e-300,1e+300,-1.7976931348623157e+308,5e-324]} : f32[2,3]`,
		`{floats=floats[]} : f32[0]`,
		`{ints=ints[]} : i64[0]`,
		`{hi=448.0, lo=-inf}`,
		`{value=-0.0}`,
		`{value=5e-324}`,
		`{axis=-1, keepdim=false}`,
		`{force=true, name="weird \"name\"\twith\ttabs, ünïcödé, \x00 and \xff"}`,
		`: i32[B,S,min(S,128)]`,
		`graph "decode graph" {`,
		`  output "odd name" = %12`,
		`%33 = matmul_fp8(%30, %9) : bf16[B,S,128]`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	m2, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	if got := Format(m2); got != text {
		t.Fatalf("round trip differs:\n%s", firstDiff(text, got))
	}
	if err := VerifyModule(m2); err != nil {
		t.Fatal(err)
	}
	// Values come back with their Go types.
	g := m2.Graph("prefill")
	if g.NextID() != 3*(len(g.Nodes)-1)+1 {
		t.Errorf("NextID %d after parsing IDs up to %d", g.NextID(), 3*(len(g.Nodes)-1))
	}
	byID := map[int]*Node{}
	for _, n := range g.Nodes {
		byID[n.ID] = n
	}
	if v := byID[12].Attrs["ints"]; !reflect.DeepEqual(v, []int64{-1, 0, math.MaxInt64}) {
		t.Errorf("ints: %#v", v)
	}
	if v, ok := byID[18].Attrs["floats"].([]float64); !ok || len(v) != 0 {
		t.Errorf("empty floats: %#v", byID[18].Attrs["floats"])
	}
	if v, ok := byID[21].Attrs["ints"].([]int64); !ok || len(v) != 0 {
		t.Errorf("empty ints: %#v", byID[21].Attrs["ints"])
	}
	fl := byID[15].Attrs.Floats("floats")
	if len(fl) != 6 || fl[4] != -math.MaxFloat64 || fl[5] != 5e-324 || fl[2] != 1e-300 {
		t.Errorf("floats: %v", fl)
	}
	for _, n := range g.Nodes {
		if n.Op == "add_scalar" {
			if v := n.Attrs.Float("value", 1); v != 0 || !math.Signbit(v) {
				t.Errorf("negative zero came back as %v", v)
			}
		}
		if n.Op == "probe" && n.Attrs.Str("name", "") == "" {
			t.Errorf("probe name lost")
		}
	}
	if m2.Meta["a key"] != "line\nbreak" || m2.Meta["z"] != "" {
		t.Errorf("meta: %q", m2.Meta)
	}
	if len(g.Outputs) != 4 || g.Outputs[3].Name != "odd name" || g.Outputs[3].Node != byID[12] {
		t.Errorf("outputs: %+v", g.Outputs)
	}
}

func TestParseLenient(t *testing.T) {
	// Comments, blank lines, spaces, a missing module block, "()" and "{}",
	// typed lists and integers in a float list all parse; the text formats
	// canonically.
	in := `
# a comment
// another
graph g {
    %1 = input{name = "x"}:f32[ B , 4 ]
  %2 = const {floats=floats[1, 2.5]} : f32[2]
  %7 = relu ( %1 ) {} : f32[B,4]
  %8 = clamp(%7) {hi=+inf} : f32[B,4]
  output y = %8
}
`
	m, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `module {
}
graph g {
  %1 = input {name="x"} : f32[B,4]
  %2 = const {floats=[1.0,2.5]} : f32[2]
  %7 = relu(%1) : f32[B,4]
  %8 = clamp(%7) {hi=inf} : f32[B,4]
  output y = %8
}
`
	if got := Format(m); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if e, err := Parse(""); err != nil || len(e.Graphs) != 0 || Format(e) != "module {\n}\n" {
		t.Fatalf("empty text: %v %v", e, err)
	}
}

const goodGraph = `module {
  meta "k" = "v"
}
graph g {
  %0 = input {name="x"} : bf16[B,S,64]
  %1 = weight {format="bf16", name="w"} : bf16[128,64]
  %2 = matmul(%0, %1) : bf16[B,S,128]
  output y = %2
}
`

func TestParseErrors(t *testing.T) {
	if _, err := Parse(goodGraph); err != nil {
		t.Fatalf("good graph: %v", err)
	}
	// Each case replaces one line of goodGraph (by its prefix) or gives a
	// whole text, and names the error.
	cases := []struct {
		name, old, new, want string
	}{
		{"unknown op", "  %2 = matmul(", "  %2 = matmull(", `line 7: unknown op "matmull"`},
		{"undefined arg", "(%0, %1)", "(%0, %5)", `line 7: %2 matmul: argument 1: %5 is not defined`},
		{"use before def", "  %0 = input", "  %0 = relu(%2) : f32[]\n  %9 = input", `line 5: %0 relu: argument 0: %2 is not defined`},
		{"duplicate id", "  %1 = weight", "  %0 = weight", `line 6: %0 is defined twice`},
		{"type mismatch", ": bf16[B,S,128]", ": bf16[B,S,64]", `line 7: %2 matmul: printed type bf16[B,S,64] but rule gives bf16[B,S,128]`},
		{"rule error", "bf16[128,64]", "bf16[128,32]", `line 7: %2 matmul: inner dims differ`},
		{"arity", "(%0, %1)", "(%0, %1, %1)", `line 7: %2 matmul: takes 2 arguments, got 3`},
		{"source with args", `%1 = weight {`, `%1 = weight(%0) {`, `line 6: %1 weight: takes 0 arguments, got 1`},
		{"unknown attribute", `{format="bf16", name="w"}`, `{format="bf16", name="w", bias=1}`, `line 6: %1 weight: unknown attribute "bias"`},
		{"missing attribute", `{format="bf16", name="w"}`, `{name="w"}`, `line 6: %1 weight: missing attribute "format"`},
		{"attribute kind", `{format="bf16", name="w"}`, `{format="bf16", name="w", layer=2.0}`, `line 6: %1 weight: attribute "layer": want int, got float 2.0`},
		{"attribute twice", `{name="x"}`, `{name="x", name="y"}`, `line 5: %0 input: attribute name given twice`},
		{"bad type", ": bf16[B,S,64]", ": bf17[B,S,64]", `line 5: %0 input: unknown dtype "bf17"`},
		{"bad shape", ": bf16[B,S,64]", ": bf16[B,S,(64]", `line 5: %0 input: bad shape "[B,S,(64]": unbalanced parentheses`},
		{"source rule", `{format="bf16", name="w"}`, `{format="fp4", name="w"}`, `line 6: %1 weight: format fp4 needs dtype fp4e2m1, got bf16`},
		{"no type", " : bf16[B,S,128]", "", `line 7: %2 matmul: want ': type' after the op`},
		{"bad string", `{name="x"}`, `{name="x\q"}`, `line 5: %0 input: attribute name: bad string "x\q"`},
		{"unterminated string", `{name="x"}`, `{name="x}`, `line 5: %0 input: attribute name: unterminated string`},
		{"empty list", `{name="x"}`, `{name=[]}`, `line 5: %0 input: attribute name: empty list: write ints[] or floats[]`},
		{"mixed list", `{name="x"}`, `{name=[1,2.5]}`, `line 5: %0 input: attribute name: list mixes integers and floats`},
		{"bad number", `{name="x"}`, `{name=0x10}`, `line 5: %0 input: attribute name: bad value "0x10"`},
		{"int range", `{name="x"}`, `{name=99999999999999999999}`, `line 5: %0 input: attribute name: integer 99999999999999999999 out of range`},
		{"undefined output", "output y = %2", "output y = %3", `line 8: output y: %3 is not defined`},
		{"duplicate output", "  output y = %2", "  output y = %2\n  output y = %1", `line 9: duplicate output y`},
		{"trailing junk", "  output y = %2", "  output y = %2 %1", `line 8: unexpected "%1" at the end of the line`},
		{"unterminated graph", "  output y = %2\n}", "  output y = %2", `line 9: unterminated graph g`},
		{"garbage", "graph g {", "grap g {", `line 4: want `},
		{"node syntax", "  %2 = matmul(%0, %1)", "  %2 matmul(%0, %1)", `line 7: %2: want '=' after the node id`},
		{"meta", `meta "k" = "v"`, `meta "k" = v`, `line 2: meta k: want a quoted string`},
		{"second module", "graph g {", "module {\n}\ngraph g {", `line 4: second module block`},
		{"id range", "  %2 = matmul(%0, %1)", "  %99999999999999999999 = matmul(%0, %1)", `line 7: node id %99999999999999999999 out of range`},
	}
	for _, c := range cases {
		text := goodGraph
		if c.old != "" {
			if !strings.Contains(text, c.old) {
				t.Fatalf("%s: %q not in the text", c.name, c.old)
			}
			text = strings.Replace(text, c.old, c.new, 1)
		}
		_, err := Parse(text)
		if err == nil {
			t.Errorf("%s: Parse accepted\n%s", c.name, text)
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

func TestParseGraphErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"duplicate graph", "graph g {\n}\ngraph g {\n}\n", `line 3: duplicate graph g`},
		{"state twice", `graph g {
  %0 = state {kind="window", name="r"} : bf16[B,8,4]
  %1 = input {name="kv"} : bf16[B,S,4]
  %2 = input {name="p"} : i64[]
  %3 = window_update(%0, %1, %2) : bf16[B,8,4]
  %4 = window_update(%0, %1, %2) : bf16[B,8,4]
}`, `line 6: %4 window_update: state version %0 is already updated by %3`},
		{"not state", `graph g {
  %1 = input {name="kv"} : bf16[B,8,4]
  %2 = input {name="p"} : i64[]
  %3 = window_update(%1, %1, %2) : bf16[B,8,4]
}`, `line 4: %3 window_update: argument 0 (%1 input) is not a state value`},
		{"unterminated module", "module {\n  meta \"a\" = \"b\"\n", `line 3: unterminated module block`},
		{"duplicate meta", "module {\n  meta a = \"b\"\n  meta \"a\" = \"c\"\n}\n", `line 3: duplicate meta key "a"`},
	}
	for _, c := range cases {
		_, err := Parse(c.text)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %s", c.name, err, c.want)
		}
	}
}

func TestFormatFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {-3, "-3.0"}, {0.1, "0.1"}, {1e21, "1e+21"}, {1e20, "1e+20"}, {123456, "123456.0"},
		{1e-7, "1e-07"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"}, {math.MaxFloat64, "1.7976931348623157e+308"},
	} {
		got := formatFloat(c.f)
		if got != c.want {
			t.Errorf("formatFloat(%v) = %q, want %q", c.f, got, c.want)
		}
		back, err := parseFloatWord(got)
		if err != nil || (back != c.f && !(math.IsNaN(back) && math.IsNaN(c.f))) {
			t.Errorf("%q parses to %v, %v", got, back, err)
		}
	}
}

func TestFormatBadAttr(t *testing.T) {
	// A Go int is not an attribute value: Format shows it so that Parse
	// rejects it, and Verify names it.
	g := NewGraph("g")
	x := g.Source("input", T(F32, 4, 8), Attrs{"name": "x"})
	n := &Node{Op: "sum", Args: []*Node{x}, Attrs: Attrs{"axis": 0}, Type: T(F32, 4, 1)}
	g.Append(n)
	if s := FormatNode(n); !strings.Contains(s, "{axis=<int 0>}") {
		t.Errorf("FormatNode: %s", s)
	}
	if _, err := Parse(Format(&Module{Graphs: []*Graph{g}})); err == nil {
		t.Errorf("Parse accepted a Go int attribute")
	}
	if err := Verify(g); err == nil || !strings.Contains(err.Error(), `attribute "axis" holds a Go int, want int`) {
		t.Errorf("Verify: %v", err)
	}
}
