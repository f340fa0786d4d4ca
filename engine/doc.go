// Package engine is what cmd/exec and the Go API share: bind a checkpoint to
// the weights of compiled graphs, allocate the persistent state, run prefill
// and decode calls on a backend, and record or teacher-force traces. It
// imports no pass.
//
//	m, _ := engine.Open(module, "/models/tiny", "cpu")
//	s, _ := m.NewSession(engine.Options{Batch: 1, MaxLen: 64})
//	logits, _ := s.Prefill([][]int64{{1, 2, 3}})
//	next := engine.Argmax(logits.Last())
package engine
