// Package ir is the typed SSA intermediate representation of ds4.
//
// A Graph is an ordered list of Nodes; a Node is one operation (Op, a key of
// the op table Ops), its argument nodes, its attributes and the Type (dtype
// and shape, dims constant or symbolic) of the single value it produces.
// Inputs, weights, constants and persistent state are source nodes, so a
// graph is self-contained. A Module holds the graphs of one model (prefill
// and decode) and free-form metadata.
//
// Every op's row in Ops gives its arity, attributes, flags and an Infer rule
// that computes the result type from the argument types. Graph.Add applies
// the rule while building; Verify checks a whole graph (arity, attributes
// and their finiteness, definition before use, types, linear state
// threading with no read of a state after its in-place update, outputs).
// StorageLifetimes and CheckBuffers give the lifetimes behind the buffer
// plan of passes.AssignBuffers and prove a recorded plan sound.
//
// Format and Parse convert a Module to and from a deterministic text form
// with one node per line; Parse re-infers and checks every type, so text
// that parses is a verified module:
//
//	g := ir.NewGraph("prefill")
//	x := g.Source("input", ir.T(ir.BF16, "B", "S", 64), ir.Attrs{"name": "x"})
//	w := g.Source("weight", ir.T(ir.BF16, 128, 64), ir.Attrs{"name": "w", "format": "bf16"})
//	y := g.Add("matmul", nil, x, w)
//	g.SetOutput("y", y)
//	fmt.Print(ir.Format(&ir.Module{Graphs: []*ir.Graph{g}}))
//
// prints
//
//	module {
//	}
//	graph prefill {
//	  %0 = input {name="x"} : bf16[B,S,64]
//	  %1 = weight {format="bf16", name="w"} : bf16[128,64]
//	  %2 = matmul(%0, %1) : bf16[B,S,128]
//	  output y = %2
//	}
//
// The text syntax: a `module { ... }` block of `meta "key" = "value"` lines,
// then `graph NAME { ... }` blocks of node lines
// `%ID = op(%arg, ...) {key=value, ...} : type` (argument list and attribute
// block omitted when empty, keys sorted) and `output NAME = %ID` lines.
// Names that are not identifiers are quoted. Attribute values are int64
// (`-3`), float64 (always with '.' or an exponent, or inf, -inf, nan; the
// verifier refuses NaN, and ±Inf outside a clamp bound), Go
// quoted strings, true/false, lists `[1,2]` and `[1.0,2.5]`, and the empty
// lists `ints[]` and `floats[]`. Node IDs need not be consecutive but must be
// defined before use. Blank lines and lines starting with '#' or "//" are
// ignored.
package ir
