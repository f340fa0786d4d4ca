// Package example is a backend that adds nothing of its own: it claims two
// ops (rmsnorm and hc_pre, and the bf16 weights they read) and runs them with the reference kernels of
// cpu-ref, to which it also falls back for every other op. It exists to
// show, and to test, that adding a backend is a package of its own: it
// touches no file of the engine, the scheduler or another backend, and
// is registered only where it is imported (here, by test binaries).
// docs/backends.md walks through it.
package example
