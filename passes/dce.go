package passes

import "github.com/ds4go/ds4/ir"

// DCE is dead-code elimination.
//
// Expects: a verified graph.
//
// Guarantees: every node left contributes to a graph output, a SideEffect op
// (probe) or a StateUpdate op, or is an input or state declaration (the
// graph's interface); those roots are all kept, in their order. Weights,
// constants and computations nothing reads are removed, including weight
// declarations that feed nothing (the engine binds only the weights a graph
// declares, so an unused one is not even loaded).
func DCE(g *ir.Graph) error {
	sweep(g)
	return nil
}
