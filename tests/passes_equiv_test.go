package tests

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ds4go/ds4/internal/goldentest"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/passes"
)

// TestPassesEquivalence runs the tiny golden teacher-forced with all passes
// on and with all passes off, and compares the logits (rel L2 ≤ 1e-3) and
// every traced tensor (rel L2 ≤ 1e-2); then checks that the fused run still
// gives block-local parity with the reference (tools/tracecmp).
func TestPassesEquivalence(t *testing.T) {
	if testing.Short() {
		t.Skip("teacher-forced runs in -short mode")
	}
	golden := filepath.Join(tinyDir(), "golden.safetensors")
	plain := buildTiny(t)
	if _, err := passes.Run(plain, []string{"none"}, passes.Options{VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	fused := buildTiny(t)
	if _, err := passes.Run(fused, nil, passes.Options{VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	oc := fused.Graph("decode").OpCounts()
	if oc["hc_mix"] == 0 || oc["hc_split_sinkhorn"] == 0 || oc["swiglu_clamp"] == 0 {
		t.Fatalf("the fusions did not fire on the tiny model: %v", oc)
	}
	offTrace := teacherRun(t, plain, tinyDir(), golden)
	onTrace := teacherRun(t, fused, tinyDir(), golden)

	off, err := safetensors.Open(offTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	on, err := safetensors.Open(onTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()
	names := off.Names()
	if len(names) == 0 || len(on.Names()) != len(names) {
		t.Fatalf("traces hold %d (passes off) and %d (passes on) tensors", len(names), len(on.Names()))
	}
	worst, worstAt := 0.0, ""
	for _, name := range names {
		a, _ := off.Get(name)
		b, ok := on.Get(name)
		if !ok {
			t.Errorf("%s: missing from the fused trace", name)
			continue
		}
		av, err1 := a.Float32s()
		bv, err2 := b.Float32s()
		if err1 != nil || err2 != nil || len(av) != len(bv) {
			t.Errorf("%s: cannot compare (%v, %v, %d vs %d elements)", name, err1, err2, len(av), len(bv))
			continue
		}
		rel := goldentest.RelL2(bv, av)
		tol := 1e-2
		if strings.Contains(name, "logits") {
			tol = 1e-3
		}
		if rel > tol || math.IsNaN(rel) {
			t.Errorf("%s: rel L2 %.3g > %.0e", name, rel, tol)
		}
		if rel > worst {
			worst, worstAt = rel, name
		}
	}
	t.Logf("%d traced tensors compared; worst rel L2 %.3g (%s)", len(names), worst, worstAt)

	tool := filepath.Join(repoRoot(), "..", "shared", "tools", "tracecmp") // where CI has ../shared
	if _, err := os.Stat(tool); err != nil {
		t.Skipf("tracecmp not available: %v", err)
	}
	absGolden, _ := filepath.Abs(golden)
	out, err := exec.Command("go", "-C", tool, "run", ".", absGolden, onTrace).CombinedOutput()
	t.Logf("tracecmp (fused):\n%s", out)
	if err != nil || !strings.Contains(string(out), "block-local parity: holds") {
		t.Errorf("tracecmp on the fused run: %v", err)
	}
}
