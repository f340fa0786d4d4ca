package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompilePassesNoneRuns: a plan with only the passes lowering requires
// runs and gives the same greedy ids as the default pipeline; -time-passes
// and -dump-after work; -stats reports the acceptance figures' keys.
func TestCompilePassesNoneRuns(t *testing.T) {
	dir := t.TempDir()
	ids := map[string]string{}
	for _, mode := range []string{"none", "default"} {
		p := filepath.Join(dir, mode+".plan")
		r := runBin(t, "compile", "-model", tinyDir(), "-o", p, "-passes", mode, "-time-passes")
		if r.code != 0 {
			t.Fatalf("compile -passes %s: %d %s", mode, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "renumber") || !strings.Contains(r.stderr, "assign-buffers") {
			t.Errorf("-time-passes output lacks the required passes: %q", r.stderr)
		}
		r = runBin(t, "exec", "-plan", p, "-prompt-ids", "5,6,7,8,9;10,11,12,13,14", "-max-new-tokens", "6")
		if r.code != 0 {
			t.Fatalf("exec %s plan: %d %s", mode, r.code, r.stderr)
		}
		ids[mode] = strings.Join(strings.Split(r.stdout, "\n")[:2], "|")
	}
	if ids["none"] != ids["default"] {
		t.Errorf("greedy ids differ: passes none %q vs default %q", ids["none"], ids["default"])
	}

	dumps := filepath.Join(dir, "dumps")
	r := runBin(t, "compile", "-model", tinyDir(), "-dump-after", "all", "-dump-dir", dumps)
	if r.code != 0 {
		t.Fatalf("compile -dump-after all: %s", r.stderr)
	}
	entries, _ := os.ReadDir(dumps)
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	joined := strings.Join(names, " ")
	for _, want := range []string{"build.ir", "fuse-sinkhorn-decode.ir", "assign-buffers-prefill.ir"} {
		if !strings.Contains(joined, want) {
			t.Errorf("dump files %v lack %s", names, want)
		}
	}

	r = runBin(t, "compile", "-model", tinyDir(), "-passes", "dce,nope")
	cliWantUsageError(t, r, "unknown pass")

	r = runBin(t, "compile", "-model", tinyDir(), "-stats", "-stats-tokens", "64")
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("-stats output is not JSON: %v: %s", err, r.stdout)
	}
	for _, k := range []string{"ops_before", "ops_after", "decode_kernels_before", "decode_kernels_after", "peak_activation_bytes", "naive_activation_bytes"} {
		if _, ok := st[k]; !ok {
			t.Errorf("-stats lacks %s", k)
		}
	}
	if st["decode_kernels_after"].(float64)*3 > st["decode_kernels_before"].(float64) {
		t.Errorf("decode kernels %v → %v: less than 3× fewer", st["decode_kernels_before"], st["decode_kernels_after"])
	}
}
