// Package backendtest is the conformance suite every backend passes: a
// table of one-op (or few-op) cases with generated inputs, each run on the
// backend under test and on the reference backend (cpu-ref) and compared
// with the case's stated tolerance (Tol, Compare). A backend's package runs
// it from one test:
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, "cuda") }
//
// Inputs are drawn afresh on every run; DS4_BACKENDTEST_SEED (SeedEnv)
// repeats a failure's seed.
package backendtest
