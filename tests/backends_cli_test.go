package tests

// The backend registry and placement on the command line: exec
// -list-backends, exec/compile -placement, the plan's recorded backend, and
// their catalogue entries (docs/errors.md, "Backends: listing and
// placement").

import (
	"path/filepath"
	"strings"
	"testing"
)

func init() {
	errsCases = append(errsCases, []errsCase{
		{name: "compile-backend-unknown", cmd: "compile", want: `-backend: backend "nope" is not available (have: [cpu `, setup: flagsCompile("-backend", "nope", "-o", "out.plan")},
		{name: "list-backends-extra", cmd: "exec", want: "-plan has no effect with -list-backends", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-list-backends", "-plan", fx.goodPlan}
		}},
		{name: "placement-runs-nothing", cmd: "exec", want: "-prompt-ids has no effect with -placement (it prints the placement and runs nothing)", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-plan", fx.goodPlan, "-placement", "-prompt-ids", "1,2"}
		}},
	}...)
}

// TestExecListBackends: every registered backend has a line; the host ones
// are available and say what they run; cuda says why not on a machine
// without a GPU (or names its device where there is one).
func TestExecListBackends(t *testing.T) {
	r := runBin(t, "exec", "-list-backends")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		name, rest, _ := strings.Cut(l, ": ")
		lines[name] = rest
	}
	for name, want := range map[string]string{
		"cpu":      "available: host, ",
		"cpu-ref":  "available: host, reference kernels (pure Go); every op",
		"gorgonia": "available: host, gorgonia",
	} {
		if !strings.HasPrefix(lines[name], want) {
			t.Errorf("%s: %q, want it to start with %q", name, lines[name], want)
		}
	}
	if !strings.HasSuffix(lines["cpu"], "the rest on cpu-ref") || !strings.HasSuffix(lines["gorgonia"], "the rest on cpu") {
		t.Errorf("fallbacks not named: cpu %q, gorgonia %q", lines["cpu"], lines["gorgonia"])
	}
	if c, ok := lines["cuda"]; !ok || !(strings.HasPrefix(c, "unavailable: ") || strings.HasPrefix(c, "available: ")) {
		t.Errorf("cuda: %q", c)
	}
}

// TestPlacementCLI: exec -placement prints both graphs on the plan's
// backend (the one compile -backend recorded) or -backend's, runs nothing;
// compile -placement prints the same for the graphs it compiles.
func TestPlacementCLI(t *testing.T) {
	plan := tinyPlan(t)
	r := runBin(t, "exec", "-plan", plan, "-placement")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exec -placement: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"graph prefill on cpu (chain cpu → cpu-ref): ", "graph decode on cpu (chain cpu → cpu-ref): ", "\n  cpu-ref: ", "handed over between host backends), 0 bytes copied per call at B=1 S=1 M=4096"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("exec -placement output lacks %q:\n%.600s", want, r.stdout)
		}
	}
	g := runBin(t, "exec", "-plan", plan, "-placement", "-backend", "gorgonia")
	if g.code != 0 || !strings.Contains(g.stdout, "graph decode on gorgonia (chain gorgonia → cpu → cpu-ref)") || !strings.Contains(g.stdout, "\n  gorgonia: ") {
		t.Errorf("exec -placement -backend gorgonia: exit %d\n%.400s", g.code, g.stdout)
	}
	refPlan := filepath.Join(t.TempDir(), "ref.plan")
	c := runBin(t, "compile", "-model", tinyDir(), "-backend", "cpu-ref", "-o", refPlan, "-placement")
	if c.code != 0 || !strings.Contains(c.stdout, "graph decode on cpu-ref (chain cpu-ref): ") || !strings.Contains(c.stdout, " in 1 segments; 0 values cross") {
		t.Fatalf("compile -placement -backend cpu-ref: exit %d %s\n%.400s", c.code, c.stderr, c.stdout)
	}
	e := runBin(t, "exec", "-plan", refPlan, "-placement")
	if e.code != 0 || !strings.Contains(e.stdout, "graph prefill on cpu-ref (chain cpu-ref)") {
		t.Errorf("exec -placement of a plan recording cpu-ref: exit %d\n%.300s", e.code, e.stdout)
	}
}
