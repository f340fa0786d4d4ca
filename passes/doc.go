// Package passes holds the compiler passes of ds4: generic clean-ups
// (canonicalisation, constant folding, common-subexpression elimination,
// dead-code elimination), the model fusions that turn the primitive ops the
// builder emits into the fused rows of the op table (hc_mix,
// hc_split_sinkhorn, swiglu_clamp), and analyses (memory planning, op
// statistics).
//
// The passes are listed in order in one place, Pipeline in pipeline.go; Run
// applies them to every graph of a module, optionally verifying the graph
// after each pass, timing them and dumping the IR:
//
//	rep, err := passes.Run(m, nil, passes.Options{VerifyEach: true})
//	if err != nil { ... }
//	fmt.Print(rep.Timings())
//
// Every pass keeps probes (SideEffect ops) with their names, in their order,
// observing the same values, and never reorders StateUpdate ops.
package passes
