// Package enginetest runs checkpoints through the engine for tests of
// several packages, like net/http/httptest: a block-local (teacher-forced)
// run that writes a trace. It is imported by tests only.
//
//	m := dstest.BuildTiny(t)
//	trace, placed := enginetest.TeacherRun(t, m, dstest.TinyDir(), dstest.TinyGolden(), "cpu")
package enginetest
