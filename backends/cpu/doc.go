// Package cpu holds the CPU backends, registered as two:
//
//   - "cpu-ref" runs every op of the IR table with the reference kernels
//     (package kernels), written to be obviously right and to reproduce
//     DeepSeek's reference numerics; other backends are checked against it.
//   - "cpu" runs the ops that have optimised kernels (package fast: the
//     products, norms, attention, hyper-connection mixes, quantisation,
//     vectorised bf16 rounding) and falls back to cpu-ref for the rest,
//     through its capabilities (backends.Schedule).
//
// Both are host backends (backends.HostDevice): values cross between them
// without a copy, and they bind weights alike (BindWeight). Import the
// package for its side effect and open a model on either:
//
//	import _ "github.com/ds4go/ds4/backends/cpu"
//	model, err := engine.Open(module, dir, "cpu") // or "cpu-ref"
//
// This package maps ops to kernels and manages run-time values.
package cpu
