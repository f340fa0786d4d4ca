package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/ir"
)

// Check proves what exec relies on beyond the verifier (ir.VerifyModule,
// which the caller runs first), so that an edited plan is refused instead
// of running with wrong answers:
//
//   - the module holds exactly the graphs prefill and decode, as the header
//     lists them, and its metadata agrees with the header;
//   - node IDs count 0, 1, 2, … in each graph (renumber ran last, so a
//     moved or deleted line shows), and every value that is not a source, a
//     probe or a state update is read (no output pointed away from it);
//   - the buffer plan is sound (ir.CheckBuffers: no two live values share a
//     slot, every new activation has one, outputs have none);
//   - the inputs are tokens i64[B,S] (decode: [B,1]) and start_pos i64[];
//     the one output is logits f32[B,S,V] (decode: [B,1,V]), V the rows of
//     embed.weight;
//   - the graphs (prefill, decode and, in a plan that has it, chunk)
//     declare the same states (name, kind, type), the same
//     weights (a name bound twice is declared alike; a weight named
//     layers.N.… has layer=N) and the same probes (names unique), and every
//     state is updated exactly once per call.
func Check(p *Plan) error {
	m := p.Module
	names := make([]string, len(m.Graphs))
	for i, g := range m.Graphs {
		names[i] = g.Name
	}
	if !slices.Equal(names, []string{"prefill", "decode"}) && !slices.Equal(names, []string{"prefill", "decode", "chunk"}) {
		return fmt.Errorf("graphs %q, want [prefill decode] or [prefill decode chunk]", names)
	}
	if !slices.Equal(p.Graphs, names) {
		return fmt.Errorf("the header lists graphs %q, the file holds %q", p.Graphs, names)
	}
	for _, kv := range [][2]string{{"model", p.Model}, {"config_fingerprint", p.ConfigFingerprint}} {
		if mv, ok := m.Meta[kv[0]]; ok && mv != kv[1] {
			return fmt.Errorf("module meta %q is %q, the header says %q", kv[0], mv, kv[1])
		}
	}
	facts := make([]graphFacts, len(m.Graphs))
	for i, g := range m.Graphs {
		f, err := checkGraph(g, g.Name == "decode")
		if err != nil {
			return err
		}
		facts[i] = f
	}
	if len(facts) == 3 { // the chunk graph shares everything with the prefill graph
		if err := sameFacts(facts[0], facts[2], "chunk"); err != nil {
			return err
		}
	}
	return sameFacts(facts[0], facts[1], "decode")
}

// sameFacts refuses a graph (named other) whose logits, weights, probes or
// states differ from the prefill graph's.
func sameFacts(pre, dec graphFacts, other string) error {
	diff := func(a, b map[string]string) string {
		return strings.ReplaceAll(firstDiff(a, b), "decode", other)
	}
	if pre.vocab != dec.vocab {
		return fmt.Errorf("prefill logits have %d columns, %s logits %d", pre.vocab, other, dec.vocab)
	}
	for _, f := range []graphFacts{pre, dec} {
		if f.embedRows >= 0 && f.embedRows != f.vocab {
			return fmt.Errorf("logits have %d columns, embed.weight %d rows (the vocabulary)", f.vocab, f.embedRows)
		}
	}
	if !maps.Equal(pre.weights, dec.weights) {
		return fmt.Errorf("prefill and %s bind different weights (%s): both bind every weight of the model alike", other, diff(pre.weights, dec.weights))
	}
	if !maps.Equal(pre.probes, dec.probes) {
		return fmt.Errorf("prefill and %s have different probes (%s): traces name the same values in both", other, diff(pre.probes, dec.probes))
	}
	if !maps.Equal(pre.states, dec.states) {
		return fmt.Errorf("prefill and %s declare different states (%s): both calls share the session's state", other, diff(pre.states, dec.states))
	}
	return nil
}

// graphFacts is what Check compares between the two graphs.
type graphFacts struct {
	vocab     int64
	embedRows int64             // -1 without an embed.weight node
	states    map[string]string // name → "kind type"
	weights   map[string]string // name → "{attrs} : type"
	probes    map[string]string // name → "" (a set)
}

// firstDiff names the first key, in sorted order, where a and b differ.
func firstDiff(a, b map[string]string) string {
	keys := slices.Sorted(maps.Keys(a))
	keys = append(keys, slices.Sorted(maps.Keys(b))...)
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		switch {
		case !oka:
			return fmt.Sprintf("%q only in decode", k)
		case !okb:
			return fmt.Sprintf("%q only in prefill", k)
		case va != vb:
			return fmt.Sprintf("%q is %s in prefill, %s in decode", k, va, vb)
		}
	}
	return ""
}

func checkGraph(g *ir.Graph, decode bool) (graphFacts, error) {
	f := graphFacts{embedRows: -1, states: map[string]string{}, weights: map[string]string{}, probes: map[string]string{}}
	if err := checkIDs(g); err != nil {
		return f, err
	}
	seq := ir.Sym("S")
	if decode {
		seq = ir.C(1)
	}
	v, err := checkLogits(g, seq)
	if err != nil {
		return f, err
	}
	f.vocab = v
	if err := checkInputs(g, seq); err != nil {
		return f, err
	}
	if err := checkUsed(g); err != nil {
		return f, err
	}
	if err := ir.CheckBuffers(g); err != nil {
		return f, err
	}
	if err := checkStates(g, f.states); err != nil {
		return f, err
	}
	probes := map[string]*ir.Node{}
	for _, n := range g.Nodes {
		name := n.Attrs.Str("name", "")
		switch n.Op {
		case "probe":
			if o := probes[name]; o != nil {
				return f, fmt.Errorf("graph %s: %%%d (probe): name %q is also the name of %%%d", g.Name, n.ID, name, o.ID)
			}
			probes[name] = n
			f.probes[name] = ""
		case "weight":
			if err := checkWeight(n, f.weights); err != nil {
				return f, fmt.Errorf("graph %s: %%%d (weight): %v", g.Name, n.ID, err)
			}
			if name == "embed.weight" && len(n.Type.Shape) > 0 && n.Type.Shape[0].IsConst() {
				f.embedRows = n.Type.Shape[0].N
			}
		}
	}
	return f, nil
}

// checkWeight records a weight's declaration and checks that it agrees
// with an earlier one of the same name and that a per-layer name
// (layers.N.…) carries layer=N: a weight renamed to another layer's
// tensor of the same shape shows.
func checkWeight(n *ir.Node, seen map[string]string) error {
	name := n.Attrs.Str("name", "")
	_, decl, _ := strings.Cut(ir.FormatNode(n), " = weight ")
	if d, ok := seen[name]; ok && d != decl {
		return fmt.Errorf("%q is declared %s here and %s before", name, decl, d)
	}
	seen[name] = decl
	layer := n.Attrs.Int("layer", -1)
	want := int64(-1)
	if rest, ok := strings.CutPrefix(name, "layers."); ok {
		digits, _, _ := strings.Cut(rest, ".")
		if v, err := strconv.ParseInt(digits, 10, 64); err == nil {
			want = v
		}
	}
	switch {
	case layer != want && want < 0:
		return fmt.Errorf("%q has layer=%d but is not a per-layer (layers.N.…) weight", name, layer)
	case layer != want:
		return fmt.Errorf("%q has layer=%d, its name says layer %d", name, layer, want)
	}
	return nil
}

// checkIDs checks that IDs count up in schedule order.
func checkIDs(g *ir.Graph) error {
	for i, n := range g.Nodes {
		if n.ID != i {
			return fmt.Errorf("graph %s: node %d of the schedule is %%%d (%s): IDs must count 0, 1, 2, … in schedule order (were lines moved or removed?)", g.Name, i, n.ID, n.Op)
		}
	}
	return nil
}

// checkUsed checks that every computed value has a reader: the builder
// makes none without one, and an output pointed elsewhere leaves one.
func checkUsed(g *ir.Graph) error {
	uses := g.UseCounts()
	for _, n := range g.Nodes {
		info := n.Info()
		if uses[n] == 0 && !info.Has(ir.Source) && !info.Has(ir.SideEffect) && !info.Has(ir.StateUpdate) {
			return fmt.Errorf("graph %s: %%%d (%s): its value is never used (was an output pointed elsewhere?)", g.Name, n.ID, n.Op)
		}
	}
	return nil
}

func checkInputs(g *ir.Graph, seq ir.Dim) error {
	want := map[string]ir.Type{"tokens": ir.T(ir.I64, "B", seq), "start_pos": ir.T(ir.I64)}
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Op != "input" {
			continue
		}
		name := n.Attrs.Str("name", "")
		t, ok := want[name]
		switch {
		case !ok:
			return fmt.Errorf("graph %s: %%%d (input): unknown input %q (exec gives tokens and start_pos)", g.Name, n.ID, name)
		case seen[name]:
			return fmt.Errorf("graph %s: %%%d (input): input %q declared twice", g.Name, n.ID, name)
		case !n.Type.Equal(t):
			return fmt.Errorf("graph %s: %%%d (input): %s is %s, want %s", g.Name, n.ID, name, n.Type, t)
		}
		seen[name] = true
	}
	return nil
}

// checkLogits returns V of the one output, logits f32[B,seq,V].
func checkLogits(g *ir.Graph, seq ir.Dim) (int64, error) {
	if len(g.Outputs) != 1 || g.Outputs[0].Name != "logits" {
		names := make([]string, len(g.Outputs))
		for i, o := range g.Outputs {
			names[i] = o.Name
		}
		return 0, fmt.Errorf("graph %s: outputs %q, want exactly one, logits", g.Name, names)
	}
	n := g.Outputs[0].Node
	s := n.Type.Shape
	if n.Type.DType != ir.F32 || len(s) != 3 || s[0] != ir.Sym("B") || s[1] != seq || !s[2].IsConst() || s[2].N <= 0 {
		return 0, fmt.Errorf("graph %s: output logits is %%%d (%s) of type %s, want f32[B,%s,V]", g.Name, n.ID, n.Op, n.Type, seq)
	}
	return s[2].N, nil
}

// checkStates records each state's kind and type and checks that it is
// updated exactly once (the verifier allows at most once).
func checkStates(g *ir.Graph, states map[string]string) error {
	root := map[*ir.Node]*ir.Node{} // state version → its state node
	updates := map[*ir.Node]int{}
	for _, n := range g.Nodes {
		switch {
		case n.Op == "state":
			name := n.Attrs.Str("name", "")
			if _, dup := states[name]; dup {
				return fmt.Errorf("graph %s: %%%d (state): state %q declared twice", g.Name, n.ID, name)
			}
			states[name] = n.Attrs.Str("kind", "") + " " + n.Type.String()
			root[n] = n
		case n.Info().Has(ir.StateUpdate):
			r := root[n.Args[0]]
			root[n] = r
			updates[r]++
		}
	}
	for _, n := range g.Nodes {
		if n.Op == "state" && updates[n] != 1 {
			return fmt.Errorf("graph %s: %%%d (state): state %q is updated %d times per call, want once", g.Name, n.ID, n.Attrs.Str("name", ""), updates[n])
		}
	}
	return nil
}
