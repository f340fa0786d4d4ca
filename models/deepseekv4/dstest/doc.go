// Package dstest holds what the tests of several packages need of the tiny
// golden checkpoint of the DeepSeek V4 model: its location, its module, its
// id tensors, and the relative L2 distance the tolerances are stated in. It
// is imported by tests only (engine/enginetest runs the checkpoint).
//
//	m := dstest.BuildTiny(t)
//	trace, _ := enginetest.TeacherRun(t, m, dstest.TinyDir(), dstest.TinyGolden(), "cpu")
package dstest
