package tests

import (
	"testing"

	"github.com/ds4go/ds4/internal/goldentest"
	"github.com/ds4go/ds4/ir"
)

// Short names for the shared golden-run helpers (internal/goldentest).
var (
	repoRoot  = goldentest.RepoRoot
	tinyDir   = goldentest.TinyDir
	buildTiny = goldentest.BuildTiny
	ids2      = goldentest.IDs
)

// teacherRun is a block-local run of golden on the CPU backend (cpuBackend);
// it returns the trace file.
func teacherRun(t testing.TB, m *ir.Module, dir, golden string) string {
	t.Helper()
	trace, _ := goldentest.TeacherRun(t, m, dir, golden, cpuBackend)
	return trace
}
