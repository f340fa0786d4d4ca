// Package engine is the runtime that cmd/exec and Go programs share: open a
// plan's graphs on a backend (engine.Open places them by capability and
// binds the checkpoint's weights through the backends' devices), allocate a
// session's state, RoPE tables and activation arenas on those devices, run
// prefill and decode calls, sample (Generate, Sample), check a plan against
// a checkpoint (CheckPlan), and record or teacher-force traces. It imports
// no pass and no backend implementation: a program imports the backends it
// wants for their registration.
//
//	import _ "github.com/ds4go/ds4/backends/cpu"
//
//	m, _ := engine.Open(module, "/models/tiny", "cpu")
//	defer m.Close()
//	s, _ := m.NewSession(engine.Options{Batch: 1, MaxLen: 64})
//	defer s.Close()
//	g, _ := s.Generate([][]int64{{1, 2, 3}}, engine.GenerateOptions{MaxNew: 8})
//	fmt.Println(g.IDs[0])
//
// A Batch (batch.go) is continuous batching for a server: Slots sequences
// that join and leave between decode steps, each at its own position.
// Prefill runs one slot alone (PrefillMany: several, side by side, one per
// core); Step runs the listed slots in calls of the decode graph
// (backends.Runner.RunRows: the nodes whose shapes depend on the position
// once per row, the rest, and the ops whose kernels take every row's
// position, once for all rows of the call), the rows split into groups run side
// by side, one per core; StepPrefill runs a Step and prefills of other
// slots side by side (the results those of one after the other). Greedy answers equal a lone session's bit for bit
// on the host backends (cpu-ref, cpu, gorgonia): a decode call computes
// each row as a one-row call would. On a backend without row views (cuda,
// for now) Ragged is false and a Step runs the slots' own sessions one
// after the other: correct, not batched.
package engine
