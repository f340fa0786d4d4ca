package backendtest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// Case is one row of the conformance table: a one-op (or few-op) graph
// with generated inputs, run on the backend under test and on the reference
// backend, and the tolerance their outputs must meet, with its reason.
type Case struct {
	Name string // "op/variant"
	Op   string // the op under test; a backend runs the case when it claims this op
	Tol  Tol
	// Build draws fresh inputs from r and returns the instance to run.
	Build func(r *rand.Rand) *Instance
}

// Instance is a case's graph and everything one call of it reads.
type Instance struct {
	Graph      *ir.Graph
	B, S, M, P int                             // batch, tokens, maximum length, start position
	Inputs     map[string]*backends.Tensor     // by input name (start_pos is added from P)
	Weights    map[string]*backends.HostWeight // by weight name, as the checkpoint stores them
	State      map[string]*backends.Tensor     // by state name; updated by the call
	// Trace runs the call as a trace does: every probe value is read
	// back (Result.Probes), and a forced probe's value is replaced by
	// Forced[name] (teacher forcing).
	Trace  bool
	Forced map[string]*backends.Tensor
}

// Bindings are the instance's symbol values.
func (in *Instance) Bindings() ir.Bindings {
	return ir.Bindings{B: int64(in.B), S: int64(in.S), M: int64(in.M), P: int64(in.P)}
}

// node returns the case's op-under-test node (the last node of that op).
func (in *Instance) node(op string) *ir.Node {
	for i := len(in.Graph.Nodes) - 1; i >= 0; i-- {
		if n := in.Graph.Nodes[i]; n.Op == op {
			return n
		}
	}
	return nil
}

// builder makes an instance: sources are declared from the tensors given.
type builder struct {
	r  *rand.Rand
	in *Instance
	g  *ir.Graph
	n  int // inputs named so far
}

// newBuilder starts an instance of batch B, S tokens, maximum length M and
// start position P.
func newBuilder(r *rand.Rand, name string, B, S, M, P int) *builder {
	g := ir.NewGraph(name)
	in := &Instance{Graph: g, B: B, S: S, M: M, P: P,
		Inputs: map[string]*backends.Tensor{}, Weights: map[string]*backends.HostWeight{}, State: map[string]*backends.Tensor{}}
	return &builder{r: r, in: in, g: g}
}

// declared is the type of a source holding t: dims when given (symbols
// B, S, M, P or expressions of them, checked against t's shape), else t's
// constant shape.
func (b *builder) declared(dt ir.DType, t *backends.Tensor, dims []any) ir.Type {
	if dims == nil {
		for _, d := range t.Shape {
			dims = append(dims, d)
		}
	}
	typ := ir.T(dt, dims...)
	got, err := b.in.Bindings().Dims(typ.Shape)
	if err != nil {
		panic(err)
	}
	for i, d := range got {
		if int(d) != t.Shape[i] {
			panic(fmt.Sprintf("backendtest: %s declared for a tensor of shape %v", typ, t.Shape))
		}
	}
	return typ
}

// input declares a run-time input x<k> holding t.
func (b *builder) input(t *backends.Tensor, dims ...any) *ir.Node {
	name := fmt.Sprintf("x%d", b.n)
	b.n++
	b.in.Inputs[name] = t
	return b.g.Source("input", b.declared(t.DType, t, dims), ir.Attrs{"name": name})
}

// tokens declares the tokens input with ids in [0, vocab): i64[B,S], or
// i64[B,1] for one token (a decode graph's).
func (b *builder) tokens(vocab int64) *ir.Node {
	t := ints(randInts(b.r, b.in.B*b.in.S, vocab), b.in.B, b.in.S)
	b.in.Inputs["tokens"] = t
	dims := []any{"B", "S"}
	if b.in.S == 1 {
		dims[1] = 1
	}
	return b.g.Source("input", b.declared(ir.I64, t, dims), ir.Attrs{"name": "tokens"})
}

// startPos declares the start_pos input (its value is P).
func (b *builder) startPos() *ir.Node {
	b.in.Inputs["start_pos"] = scalar(int64(b.in.P))
	return b.g.Source("input", ir.T(ir.I64), ir.Attrs{"name": "start_pos"})
}

// weight declares checkpoint tensor name holding w (its format and dtype;
// an expert stack when w has Parts).
func (b *builder) weight(name string, w *backends.HostWeight) *ir.Node {
	a := ir.Attrs{"name": name, "format": w.Format}
	if w.Parts != nil {
		a["experts"] = int64(len(w.Parts))
		name += ".{e}"
		a["name"] = name
	}
	n := b.g.Source("weight", ir.T(w.DType, anys(w.Shape)...), a)
	w.Node, w.Name = n, name
	for e, p := range w.Parts {
		p.Node, p.Name = n, strings.ReplaceAll(name, "{e}", fmt.Sprint(e))
	}
	b.in.Weights[name] = w
	return n
}

func anys(s []int) []any {
	out := make([]any, len(s))
	for i, d := range s {
		out[i] = d
	}
	return out
}

// state declares persistent state name of kind holding t.
func (b *builder) state(name, kind string, t *backends.Tensor, dims ...any) *ir.Node {
	b.in.State[name] = t
	return b.g.Source("state", b.declared(t.DType, t, dims), ir.Attrs{"name": name, "kind": kind})
}

func (b *builder) add(op string, attrs ir.Attrs, args ...*ir.Node) *ir.Node {
	return b.g.Add(op, attrs, args...)
}

// out names the graph outputs out, out1, ... and returns the instance.
func (b *builder) out(ns ...*ir.Node) *Instance {
	for i, n := range ns {
		name := "out"
		if i > 0 {
			name = fmt.Sprintf("out%d", i)
		}
		b.g.SetOutput(name, n)
	}
	return b.in
}

// i is an int attribute value.
func i(v int) int64 { return int64(v) }
