package ir

import (
	"errors"
	"fmt"
	"math"
)

// Verify checks a graph against the op table and the SSA rules:
//
//   - every node has a known op, an arity in [MinArgs, MaxArgs], all required
//     attributes, no unknown ones, and attribute values of the declared kinds;
//   - arguments are non-nil nodes of the same graph defined earlier (no use
//     before definition, no foreign nodes), and node IDs are unique;
//   - the node's type equals what the op's Infer rule gives (source ops take
//     no arguments and their rule must accept the declared type);
//   - StateUpdate ops take a state value (a `state` node or an earlier
//     StateUpdate result) as argument 0, and each state version is updated at
//     most once (linear state threading); updates write the state in place,
//     so no node reads a state version after the update that consumed it;
//   - outputs refer to nodes of the graph and have unique names.
//
// It returns the first violation as one line naming the graph and the node:
// "graph decode: %12 (matmul_fp8): inner dims differ: ...".
func Verify(g *Graph) error {
	if g == nil {
		return errors.New("nil graph")
	}
	inGraph := make(map[*Node]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		inGraph[n] = true
	}
	defined := make(map[*Node]bool, len(g.Nodes))
	ids := make(map[int]*Node, len(g.Nodes))
	states := stateThreads{}
	for i, n := range g.Nodes {
		if n == nil {
			return fmt.Errorf("graph %s: node %d is nil", g.Name, i)
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("graph %s: %%%d (%s): %s", g.Name, n.ID, n.Op, fmt.Sprintf(format, a...))
		}
		if defined[n] {
			return fail("node appears twice in the graph")
		}
		if ids[n.ID] != nil {
			return fail("duplicate node id")
		}
		for j, a := range n.Args {
			switch {
			case a == nil:
				return fail("argument %d is nil", j)
			case defined[a] && states[a] != nil && !(j == 0 && isStateUpdate(n)): // a second update: states.add says so
				return fail("argument %d reads state version %%%d after %%%d updated it in place", j, a.ID, states[a].ID)
			case defined[a]:
			case inGraph[a]:
				return fail("argument %d (%%%d) is used before its definition", j, a.ID)
			default:
				return fail("argument %d (%%%d %s) is not a node of this graph", j, a.ID, a.Op)
			}
		}
		if err := checkNode(n, "type"); err != nil {
			return fail("%v", err)
		}
		if err := states.add(n); err != nil {
			return fail("%v", err)
		}
		defined[n] = true
		ids[n.ID] = n
	}
	names := map[string]bool{}
	for _, o := range g.Outputs {
		switch {
		case o.Node == nil:
			return fmt.Errorf("graph %s: output %s is nil", g.Name, formatName(o.Name))
		case !inGraph[o.Node]:
			return fmt.Errorf("graph %s: output %s (%%%d %s) is not a node of this graph", g.Name, formatName(o.Name), o.Node.ID, o.Node.Op)
		case names[o.Name]:
			return fmt.Errorf("graph %s: duplicate output name %s", g.Name, formatName(o.Name))
		}
		names[o.Name] = true
	}
	return nil
}

// VerifyModule verifies every graph of a module and checks that graph names
// are unique.
func VerifyModule(m *Module) error {
	if m == nil {
		return errors.New("nil module")
	}
	names := map[string]bool{}
	for i, g := range m.Graphs {
		if g == nil {
			return fmt.Errorf("module: graph %d is nil", i)
		}
		if names[g.Name] {
			return fmt.Errorf("module: duplicate graph name %s", formatName(g.Name))
		}
		names[g.Name] = true
		if err := Verify(g); err != nil {
			return err
		}
	}
	return nil
}

// checkNode checks one node against its op table row: op, arity, attributes
// and type. Arguments must be non-nil (the caller checks where they come
// from). typeWord names the node's type in the mismatch message ("type" or
// "printed type").
func checkNode(n *Node, typeWord string) error {
	info := Ops[n.Op]
	if info == nil {
		return fmt.Errorf("unknown op %q", n.Op)
	}
	if len(n.Args) < info.MinArgs || (info.MaxArgs >= 0 && len(n.Args) > info.MaxArgs) {
		return fmt.Errorf("takes %s, got %d", arityText(info), len(n.Args))
	}
	if info.Has(Source) && len(n.Args) > 0 {
		return fmt.Errorf("source op takes no arguments, got %d", len(n.Args))
	}
	for i, a := range n.Args {
		if a == nil {
			return fmt.Errorf("argument %d is nil", i)
		}
	}
	if err := checkAttrs(info, n.Attrs); err != nil {
		return err
	}
	if g := inferGuards[n.Op]; g != nil {
		if err := g(n); err != nil {
			return err
		}
	}
	t, err := info.Infer(n)
	if err != nil {
		return err
	}
	if !t.Equal(n.Type) {
		return fmt.Errorf("%s %s but rule gives %s", typeWord, n.Type, t)
	}
	return nil
}

// inferGuards holds argument checks that a few rules in ops.go rely on
// without making them, so that Verify and Parse cannot panic on bad input.
var inferGuards = map[string]func(n *Node) error{
	// engramHashRule indexes the token shape without a rank check.
	"engram_hash": func(n *Node) error {
		if t := n.Args[1].Type; t.Shape.Rank() != 2 {
			return fmt.Errorf("argument 1: want tokens [B,S], got %s", t)
		}
		return nil
	},
	// groupedRule writes the last dim of x without a rank check.
	"grouped_matmul": func(n *Node) error {
		if t := n.Args[0].Type; t.Shape.Rank() < 1 {
			return fmt.Errorf("argument 0: want rank ≥ 1, got %s", t)
		}
		return nil
	},
}

func arityText(info *OpInfo) string {
	switch {
	case info.MaxArgs < 0:
		return fmt.Sprintf("at least %d arguments", info.MinArgs)
	case info.MinArgs == info.MaxArgs && info.MinArgs == 1:
		return "1 argument"
	case info.MinArgs == info.MaxArgs:
		return fmt.Sprintf("%d arguments", info.MinArgs)
	}
	return fmt.Sprintf("%d to %d arguments", info.MinArgs, info.MaxArgs)
}

var kindNames = [...]string{AInt: "int", AFloat: "float", AString: "string", ABool: "bool", AInts: "int list", AFloats: "float list"}

func kindName(k AttrKind) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// attrKind returns the kind of an attribute value, false for Go types that
// attributes may not hold.
func attrKind(v any) (AttrKind, bool) {
	switch v.(type) {
	case int64:
		return AInt, true
	case float64:
		return AFloat, true
	case string:
		return AString, true
	case bool:
		return ABool, true
	case []int64:
		return AInts, true
	case []float64:
		return AFloats, true
	}
	return 0, false
}

func checkAttrs(info *OpInfo, a Attrs) error {
	for _, k := range a.Keys() {
		var spec *AttrSpec
		for i := range info.Attrs {
			if info.Attrs[i].Name == k {
				spec = &info.Attrs[i]
				break
			}
		}
		for i := range ScheduleAttrs {
			if spec == nil && ScheduleAttrs[i].Name == k && !info.Has(Source) {
				spec = &ScheduleAttrs[i]
			}
		}
		if spec == nil {
			return fmt.Errorf("unknown attribute %q", k)
		}
		kind, ok := attrKind(a[k])
		if !ok {
			return fmt.Errorf("attribute %q holds a Go %T, want %s", k, a[k], kindName(spec.Kind))
		}
		if kind != spec.Kind {
			return fmt.Errorf("attribute %q: want %s, got %s %s", k, kindName(spec.Kind), kindName(kind), FormatAttr(a[k]))
		}
		if err := finite(a[k], spec.Infinite); err != nil {
			return fmt.Errorf("attribute %q: %v", k, err)
		}
	}
	for _, s := range info.Attrs {
		if _, ok := a[s.Name]; s.Required && !ok {
			return fmt.Errorf("missing attribute %q", s.Name)
		}
	}
	return nil
}

func isStateUpdate(n *Node) bool { info := Ops[n.Op]; return info != nil && info.Has(StateUpdate) }

// finite refuses NaN, and ±Inf unless the attribute allows it
// (AttrSpec.Infinite): a non-finite constant or epsilon would only surface
// as NaN logits.
func finite(v any, inf bool) error {
	var fs []float64
	switch x := v.(type) {
	case float64:
		fs = []float64{x}
	case []float64:
		fs = x
	}
	for i, f := range fs {
		if math.IsNaN(f) || (math.IsInf(f, 0) && !inf) {
			if len(fs) == 1 {
				return fmt.Errorf("%v is not finite", f)
			}
			return fmt.Errorf("element %d is %v, not finite", i, f)
		}
	}
	return nil
}

// stateThreads checks linear state threading node by node: a StateUpdate
// consumes a state version (a `state` node or an earlier StateUpdate result)
// and each version is consumed at most once.
type stateThreads map[*Node]*Node // state version -> the update that consumed it

func (st stateThreads) add(n *Node) error {
	info := Ops[n.Op]
	if info == nil || !info.Has(StateUpdate) || len(n.Args) == 0 {
		return nil
	}
	a := n.Args[0]
	if a == nil {
		return fmt.Errorf("argument 0 is nil")
	}
	if ai := Ops[a.Op]; a.Op != "state" && (ai == nil || !ai.Has(StateUpdate)) {
		return fmt.Errorf("argument 0 (%%%d %s) is not a state value", a.ID, a.Op)
	}
	if u := st[a]; u != nil {
		return fmt.Errorf("state version %%%d is already updated by %%%d", a.ID, u.ID)
	}
	st[a] = n
	return nil
}
