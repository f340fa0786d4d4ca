package tests

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// exec -bench -synthetic runs the tiny config on weights generated in
// memory (the plan compiled in-process) on cpu-ref, reports the generated
// bytes as the checkpoint's, and the same seed gives the same run: the
// tiny model's logits decide the greedy tokens, so equal FLOP and expert
// counts with equal seeds, and a different seed still runs.
func TestExecBenchSynthetic(t *testing.T) {
	cfg := filepath.Join(tinyDir(), "config.json")
	run := func(seed string) map[string]any {
		t.Helper()
		r := runBin(t, "exec", "-bench", "-synthetic", "-config", cfg, "-seed", seed, "-backend", "cpu-ref", "-json",
			"-bench-prefill", "1,4", "-bench-context", "4", "-bench-decode", "2", "-bench-repeats", "1", "-probe-mb", "8")
		if r.code != 0 {
			t.Fatalf("exec -bench -synthetic: status %d: %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "synthetic weights: ") || !strings.Contains(r.stderr, " generated in ") {
			t.Errorf("stderr lacks the generation line: %q", r.stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("stdout is not the JSON report: %v\n%s", err, r.stdout)
		}
		for _, k := range []string{"decode_tokens_per_s", "weight_bytes_per_decode_token", "checkpoint_bytes", "experts_per_token", "synthetic_bytes", "synthetic_gen_seconds", "open_seconds"} {
			if v, ok := m[k].(float64); !ok || !(v > 0) {
				t.Errorf("%s = %v, want a positive number", k, m[k])
			}
		}
		if m["backend"] != "cpu-ref" {
			t.Errorf("backend %v, want cpu-ref", m["backend"])
		}
		return m
	}
	a, b := run("5"), run("5")
	// Each weight the plan binds is generated once (the passes may drop a
	// few of the model's tensors: checkpoint_bytes counts every one).
	if g, c := a["synthetic_bytes"].(float64), a["checkpoint_bytes"].(float64); g > c || g < 0.9*c {
		t.Errorf("synthetic_bytes %v, checkpoint_bytes %v: want each bound weight generated once", g, c)
	}
	for _, k := range []string{"checkpoint_bytes", "weight_bytes_per_decode_token", "experts_per_token", "decode_flops_per_token"} {
		if a[k] != b[k] {
			t.Errorf("seed 5 twice: %s %v then %v", k, a[k], b[k])
		}
	}
	run("6")
}

// The benchmark slice compiles with one layer of every kind (the
// accounting's tree names each), at the released widths; CI never
// generates its 55 GB.
func TestSliceConfigKinds(t *testing.T) {
	r := runBin(t, "compile", "-config", filepath.Join(repoRoot(), "bench", "configs", "slice.json"), "-explain")
	if r.code != 0 {
		t.Fatalf("compile -config slice.json -explain: status %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"total 98,055,086,138 parameters", "sliding-window layer: 13,754,511,990 × 2", "full layer (ratio 2): ",
		"reuse layer: 13,754,511,990 × 2", "full layer (ratio 1): ", "re-indexing layer: ", "engram (layer 1): ",
		"routed_experts: 35,389,440 × 384", "head: 661,913,600"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the slice's accounting lacks %q:\n%s", want, r.stdout)
		}
	}
}
