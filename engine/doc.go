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
package engine
