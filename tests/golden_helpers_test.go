package tests

import (
	"testing"

	"github.com/ds4go/ds4/engine/enginetest"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// Short names for the shared golden-run helpers (models/deepseekv4/dstest, engine/enginetest).
var (
	repoRoot  = dstest.RepoRoot
	tinyDir   = dstest.TinyDir
	buildTiny = dstest.BuildTiny
	ids2      = dstest.IDs
)

// teacherRun is a block-local run of golden on a CPU backend ("cpu" or
// "cpu-ref"); it returns the trace file.
func teacherRun(t testing.TB, backend string, m *ir.Module, dir, golden string) string {
	t.Helper()
	trace, _ := enginetest.TeacherRun(t, m, dir, golden, backend)
	return trace
}
