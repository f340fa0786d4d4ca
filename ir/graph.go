package ir

import (
	"fmt"
	"maps"
	"sort"
)

// Node is one operation and the single value it produces (SSA: the node is
// its value). Args are earlier nodes of the same graph.
type Node struct {
	ID    int
	Op    string
	Args  []*Node
	Attrs Attrs
	Type  Type
}

// Info returns the op table row of the node (nil for an unknown op).
func (n *Node) Info() *OpInfo { return Ops[n.Op] }

// Attrs holds the attributes of a node. Values are int64, float64, string,
// bool, []int64 or []float64.
type Attrs map[string]any

// Keys returns the attribute names in sorted order (the printing order).
func (a Attrs) Keys() []string {
	ks := make([]string, 0, len(a))
	for k := range a {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Int returns an integer attribute or def when absent.
func (a Attrs) Int(k string, def int64) int64 {
	if v, ok := a[k].(int64); ok {
		return v
	}
	return def
}

// Float returns a float attribute (an integer one is converted) or def.
func (a Attrs) Float(k string, def float64) float64 {
	switch v := a[k].(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	}
	return def
}

// Str returns a string attribute or def.
func (a Attrs) Str(k, def string) string {
	if v, ok := a[k].(string); ok {
		return v
	}
	return def
}

// Bool returns a boolean attribute or def.
func (a Attrs) Bool(k string, def bool) bool {
	if v, ok := a[k].(bool); ok {
		return v
	}
	return def
}

// Ints returns an integer-list attribute.
func (a Attrs) Ints(k string) []int64 {
	v, _ := a[k].([]int64)
	return v
}

// Floats returns a float-list attribute.
func (a Attrs) Floats(k string) []float64 {
	v, _ := a[k].([]float64)
	return v
}

// Output is a named result of a graph.
type Output struct {
	Name string
	Node *Node
}

// Graph is an ordered list of nodes (every node after its arguments) and its
// named outputs. Inputs, weights, constants and persistent state are nodes
// too (ops input, weight, const, state), so a graph is self-contained.
type Graph struct {
	Name    string
	Nodes   []*Node
	Outputs []Output
	nextID  int
}

// NewGraph returns an empty graph.
func NewGraph(name string) *Graph { return &Graph{Name: name} }

// Add appends a node, infers its type with the op table's rule and returns
// it. It panics on a rule violation: graph builders are programs, and a
// wrong graph is a bug in the builder. Use AddTyped/Verify for untrusted text.
func (g *Graph) Add(op string, attrs Attrs, args ...*Node) *Node {
	// Each node owns its attribute map: callers may pass one map to
	// several nodes, and passes write attributes of single nodes.
	n := &Node{Op: op, Args: append([]*Node(nil), args...), Attrs: maps.Clone(attrs)}
	if n.Attrs == nil {
		n.Attrs = Attrs{}
	}
	info := Ops[op]
	if info == nil {
		panic(fmt.Sprintf("ir: unknown op %q", op))
	}
	t, err := info.Infer(n)
	if err != nil {
		panic(fmt.Sprintf("ir: %s: %v", op, err))
	}
	n.Type = t
	return g.Append(n)
}

// Source appends a source node (input, weight, const, state) of a declared type.
func (g *Graph) Source(op string, t Type, attrs Attrs) *Node {
	n := &Node{Op: op, Attrs: maps.Clone(attrs), Type: t}
	if n.Attrs == nil {
		n.Attrs = Attrs{}
	}
	if _, err := Ops[op].Infer(n); err != nil {
		panic(fmt.Sprintf("ir: %s: %v", op, err))
	}
	return g.Append(n)
}

// Append adds a fully formed node, assigning it the next ID.
func (g *Graph) Append(n *Node) *Node {
	n.ID = g.nextID
	g.nextID++
	g.Nodes = append(g.Nodes, n)
	return n
}

// SetOutput names a graph result.
func (g *Graph) SetOutput(name string, n *Node) {
	g.Outputs = append(g.Outputs, Output{Name: name, Node: n})
}

// Renumber gives the nodes consecutive IDs in their current order; passes
// call it after removing nodes so that printed text stays compact.
func (g *Graph) Renumber() {
	for i, n := range g.Nodes {
		n.ID = i
	}
	g.nextID = len(g.Nodes)
}

// NextID is the ID the next appended node will get.
func (g *Graph) NextID() int { return g.nextID }

// Uses returns, for every node, the nodes that use it as an argument.
func (g *Graph) Uses() map[*Node][]*Node {
	u := make(map[*Node][]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			u[a] = append(u[a], n)
		}
	}
	return u
}

// UseCounts returns, for every node, how many readers its value has: each
// argument slot that names it, and each graph output.
func (g *Graph) UseCounts() map[*Node]int {
	u := make(map[*Node]int, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			u[a]++
		}
	}
	for _, o := range g.Outputs {
		u[o.Node]++
	}
	return u
}

// Weights returns the weight nodes of the graph, the first of each
// checkpoint name (attribute name), in graph order.
func (g *Graph) Weights() []*Node {
	var out []*Node
	seen := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Op != "weight" {
			continue
		}
		if name := n.Attrs.Str("name", ""); !seen[name] {
			seen[name] = true
			out = append(out, n)
		}
	}
	return out
}

// OpCounts returns how many nodes of each op the graph has.
func (g *Graph) OpCounts() map[string]int {
	c := map[string]int{}
	for _, n := range g.Nodes {
		c[n.Op]++
	}
	return c
}

// Module is the unit of compilation: the graphs of one model (prefill and
// decode) and free-form metadata.
type Module struct {
	Meta   map[string]string
	Graphs []*Graph
}

// Graph returns the graph of a given name or nil.
func (m *Module) Graph(name string) *Graph {
	for _, g := range m.Graphs {
		if g.Name == name {
			return g
		}
	}
	return nil
}
