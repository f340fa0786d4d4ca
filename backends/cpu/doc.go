// Package cpu is the reference backend: a kernel for every op of the IR
// table, written to be obviously right and to reproduce DeepSeek's reference
// numerics. It registers itself as "cpu"; import it for its side effect:
//
//	import _ "github.com/ds4go/ds4/backends/cpu"
//	be, _ := backends.GetOld("cpu")
//	prog, _, _ := backends.ScheduleOld(graph, be, nil)
//	err := prog.Run(env)
//
// The kernels themselves live in package kernels; this package maps ops to
// them and manages run-time values.
package cpu
