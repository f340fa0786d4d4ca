package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// goList runs go list in the repository with a format and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = repoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestEngineLayering keeps the runtime's house in order (issue 12): engine
// links no pass and no backend implementation (only the backends contract),
// so a backend is chosen by registration, not by the engine; and nothing
// under internal/ (the ground floor) imports engine, in code or tests.
func TestEngineLayering(t *testing.T) {
	const mod = "github.com/ds4go/ds4/"
	for _, p := range goList(t, "-deps", "./engine") {
		if strings.HasPrefix(p, mod+"passes") || strings.HasPrefix(p, mod+"backends/") {
			t.Errorf("engine depends on %s", p)
		}
	}
	for _, l := range goList(t, "-f", `{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./internal/...") {
		pkg, imports, _ := strings.Cut(l, ": ")
		for _, imp := range strings.Fields(imports) {
			if imp == mod+"engine" || strings.HasPrefix(imp, mod+"engine/") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
