package tests

// The "compile: config bounds" and "exec: flags" entries of docs/errors.md:
// configs parse strictly and every field that sizes work has an upper
// bound; flags out of range, or given without the flag they only make sense
// with, are one line; memory is checked before it is taken; a checkpoint
// path that came from the plan says so. Entries run in TestErrorCatalogue;
// help output and the stdout/stderr split have tests of their own below.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
)

// flagsTinyConfig writes under in the tiny config with one key set to a
// raw JSON value.
func flagsTinyConfig(t *testing.T, in, key, raw string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyDir(), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = json.RawMessage(raw)
	out, _ := json.Marshal(m)
	return errsWrite(t, filepath.Join(in, "c.json"), string(out))
}

// flagsConfig is a compile case on the tiny config with key set to raw.
func flagsConfig(key, raw string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-config", flagsTinyConfig(t, in, key, raw))
	}
}

// flagsCompile is a compile case on the good model with these flags only.
func flagsCompile(args ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return append([]string{"-model", fx.goodDir}, args...)
	}
}

// flagsExec is an exec case of the good plan and model with these flags only.
func flagsExec(args ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return append([]string{"-plan", fx.goodPlan, "-model", fx.goodDir}, args...)
	}
}

// flagsArgs is an exec case with these flags only: {tiny} is the tiny
// config, {mini} bench/configs/mini.json, {plan} the good plan.
func flagsArgs(args ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		r := strings.NewReplacer("{tiny}", filepath.Join(tinyDir(), "config.json"), "{plan}", fx.goodPlan,
			"{mini}", filepath.Join(repoRoot(), "bench", "configs", "mini.json"))
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = r.Replace(a)
		}
		return out
	}
}

// flagsTrace writes a trace file holding the prompt [1, 3] I64 and, when
// dtype is set, decode ids of that dtype and shape.
func flagsTrace(t *testing.T, in, dtype string, shape []int) string {
	t.Helper()
	ts := []safetensors.WriteTensor{{Name: "inputs.input_ids", DType: "I64", Shape: []int{1, 3}, Data: safetensors.I64Bytes([]int64{1, 2, 3})}}
	if dtype != "" {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := safetensors.I64Bytes(make([]int64, n))
		if dtype == "F32" {
			data = safetensors.F32Bytes(make([]float32, n))
		}
		ts = append(ts, safetensors.WriteTensor{Name: "inputs.decode_input_ids", DType: dtype, Shape: shape, Data: data})
	}
	p := filepath.Join(in, "trace.safetensors")
	if err := safetensors.WriteFile(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

func flagsTraceCase(dtype string, shape []int, extra ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return append([]string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-trace-in", flagsTrace(t, in, dtype, shape)}, extra...)
	}
}

// flagsTokenMap rewrites the token map of a model copy through edit.
func flagsTokenMap(edit func(v []int64, meta map[string]string)) func(t *testing.T, fx *errsFixture, in string) []string {
	return errsExecModel(func(t *testing.T, dir string) {
		p := filepath.Join(dir, "engram_token_map.safetensors")
		f, err := safetensors.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := f.Get("token_map")
		v, err := x.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]string{}
		for k, s := range f.Metadata {
			meta[k] = s
		}
		f.Close()
		edit(v, meta)
		if err := safetensors.WriteFile(p, []safetensors.WriteTensor{{Name: "token_map", DType: "I64", Shape: []int{len(v)}, Data: safetensors.I64Bytes(v)}}, meta); err != nil {
			t.Fatal(err)
		}
	})
}

func init() {
	errsCases = append(errsCases, []errsCase{
		// ---- compile: config bounds ----
		{name: "config-unknown-field", cmd: "compile", want: `c.json: field "dimm": unknown field (did you mean "dim"?)`, setup: flagsConfig("dimm", "128")},
		{name: "config-null-field", cmd: "compile", want: `c.json: field "dim": null, want an integer`, setup: flagsConfig("dim", "null")},
		{name: "config-wrong-type", cmd: "compile", want: `c.json: field "dim": want an integer, got string`, setup: flagsConfig("dim", `"128"`)},
		{name: "config-not-integer", cmd: "compile", want: `c.json: field "hc_sinkhorn_iters": want an integer (digits only, within ±9223372036854775807), got 1e12`, setup: flagsConfig("hc_sinkhorn_iters", "1e12")},
		{name: "config-sinkhorn-bound", cmd: "compile", want: "c.json: hc_sinkhorn_iters: is 1000000000000, want <= 100 (5x the release's 20", setup: flagsConfig("hc_sinkhorn_iters", "1000000000000")},
		{name: "config-layers-bound", cmd: "compile", want: "c.json: n_layers: is 100000, want <= 256", setup: flagsConfig("n_layers", "100000")},
		{name: "config-vocab-bound", cmd: "compile", want: "c.json: vocab_size: is 9223372036854775807, want <= 4194304", setup: flagsConfig("vocab_size", "9223372036854775807")},
		{name: "compile-nothing-to-do", cmd: "compile", want: "nothing to do: give -o FILE (or -explain, -explain-json, -stats, -time-passes, -dump-after, -placement)", setup: flagsCompile()},
		{name: "compile-dump-dir-alone", cmd: "compile", want: "-dump-dir only makes sense with -dump-after", setup: flagsCompile("-o", "out.plan", "-dump-dir", "dumps")},
		{name: "compile-dump-after-unknown", cmd: "compile", want: "-dump-after nope: not a stage of this run (one of: all, build, ", setup: flagsCompile("-dump-after", "nope", "-dump-dir", "dumps")},
		{name: "compile-stats-batch-alone", cmd: "compile", want: "-stats-batch only makes sense with -stats", setup: flagsCompile("-o", "out.plan", "-stats-batch", "2")},
		{name: "compile-stats-batch-negative", cmd: "compile", want: "-stats-batch -5: must be ≥ 1", setup: flagsCompile("-stats", "-stats-batch", "-5")},
		{name: "compile-stats-tokens-zero", cmd: "compile", want: "-stats-tokens 0: must be ≥ 1", setup: flagsCompile("-stats", "-stats-tokens", "0")},
		{name: "compile-max-batch-alone", cmd: "compile", want: "-max-batch only makes sense with -o", setup: flagsCompile("-explain", "-max-batch", "2")},
		{name: "compile-explain-both", cmd: "compile", want: "give one of -explain or -explain-json", setup: flagsCompile("-explain", "-explain-json")},

		// ---- exec: flags ----
		{name: "synthetic-without-bench", cmd: "exec", want: "-synthetic only makes sense with -bench", setup: flagsArgs("-synthetic", "-config", "{tiny}")},
		{name: "synthetic-without-config", cmd: "exec", want: "-synthetic needs -config FILE (the model whose weights it generates)", setup: flagsArgs("-bench", "-synthetic")},
		{name: "config-without-synthetic", cmd: "exec", want: "-config only makes sense with -synthetic", setup: flagsExec("-bench", "-config", "x.json")},
		{name: "synthetic-with-model", cmd: "exec", want: "-model has no effect with -synthetic (the weights are generated from -config)", setup: flagsExec("-bench", "-synthetic", "-config", "x.json")},
		{name: "synthetic-plan-config", cmd: "exec", want: "was compiled for config cb572782415088ac but -config ", setup: flagsArgs("-plan", "{plan}", "-bench", "-synthetic", "-config", "{mini}")},
		{name: "backend-opt-unread", cmd: "exec", want: "backend option nope: backend cpu (and its fallbacks) does not read it", setup: flagsExec("-prompt-ids", "1,2", "-backend-opt", "nope=1")},
		{name: "cuda-graphs-not-cuda", cmd: "exec", want: "backend option cuda-graphs: backend cpu (and its fallbacks) does not read it", setup: flagsExec("-prompt-ids", "1,2", "-cuda-graphs=false")},
		{name: "backend-opt-syntax", cmd: "exec", want: `invalid value "nope" for flag -backend-opt: want KEY=VALUE`, setup: flagsExec("-prompt-ids", "1,2", "-backend-opt", "nope")},
		{name: "backend-opt-twice", cmd: "exec", want: "-backend-opt a: given twice", setup: flagsExec("-prompt-ids", "1,2", "-backend-opt", "a=1", "-backend-opt", "a=2")},
		{name: "bench-floor-negative", cmd: "exec", want: "-bench-floor-gbs -1: must be a finite number ≥ 0", setup: flagsExec("-bench", "-bench-floor-gbs", "-1")},
		{name: "temperature-subnormal", cmd: "exec", want: "-temperature 1e-320: must be 0 (greedy) or ≥ 1e-06", setup: flagsExec("-prompt-ids", "1,2", "-temperature", "1e-320")},
		{name: "temperature-inf", cmd: "exec", want: "-temperature +Inf: must be a finite number", setup: flagsExec("-prompt-ids", "1,2", "-temperature", "Inf")},
		{name: "temperature-nan", cmd: "exec", want: "-temperature NaN: must be ≥ 0", setup: flagsExec("-prompt-ids", "1,2", "-temperature", "NaN")},
		{name: "prompt-plus-sign", cmd: "exec", want: `-prompt-ids: row 0: "+5" is not a token id`, setup: flagsExec("-prompt-ids", "1,+5")},
		{name: "max-len-negative", cmd: "exec", want: "-max-len -3: must be ≥ 0", setup: flagsExec("-prompt-ids", "1,2", "-max-len", "-3")},
		{name: "max-new-huge", cmd: "exec", want: "-max-new-tokens 9223372036854775807: must be ≤ 1099511627776", setup: flagsExec("-prompt-ids", "1,2", "-max-new-tokens", "9223372036854775807")},
		{name: "seed-greedy", cmd: "exec", want: "-seed only makes sense with -temperature > 0", setup: flagsExec("-prompt-ids", "1,2", "-seed", "7")},
		{name: "json-without-bench", cmd: "exec", want: "-json only makes sense with -bench", setup: flagsExec("-prompt-ids", "1,2", "-json")},
		{name: "op-times-without-bench", cmd: "exec", want: "-op-times only makes sense with -bench", setup: flagsExec("-prompt-ids", "1,2", "-op-times")},
		{name: "probe-mb-without-bench", cmd: "exec", want: "-probe-mb only makes sense with -bench", setup: flagsExec("-prompt-ids", "1,2", "-probe-mb", "8")},
		{name: "bench-with-prompt", cmd: "exec", want: "-prompt-ids has no effect with -bench (it times random prompts)", setup: flagsExec("-bench", "-prompt-ids", "1,2")},
		{name: "bench-repeats-zero", cmd: "exec", want: "-bench-repeats 0: must be ≥ 1", setup: flagsExec("-bench", "-bench-repeats", "0")},
		{name: "bench-context-memory", cmd: "exec", want: "decode after 1000000000 tokens: a session of batch 1 and maximum length 1000000035 needs ", setup: flagsExec("-bench", "-bench-context", "1000000000")},
		{name: "probe-memory", cmd: "exec", want: "the bandwidth probe buffer of 104857600000000 bytes (95.4 TiB) is more than ", setup: flagsExec("-bench", "-bench-prefill", "1", "-bench-decode", "1", "-probe-mb", "100000000")},
		{name: "trace-in-with-prompt", cmd: "exec", want: "-prompt-ids has no effect with -trace-in", setup: flagsTraceCase("", nil, "-prompt-ids", "1")},
		{name: "trace-in-decode-dtype", cmd: "exec", want: `trace.safetensors: tensor "inputs.decode_input_ids": cannot convert F32 to int64`, setup: flagsTraceCase("F32", []int{1, 2})},
		{name: "trace-in-decode-shape", cmd: "exec", want: `tensor "inputs.decode_input_ids" has shape [2], want [rows, tokens]`, setup: flagsTraceCase("I64", []int{2})},
		{name: "trace-in-decode-rows", cmd: "exec", want: `tensor "inputs.decode_input_ids" has 2 rows, inputs.input_ids 1`, setup: flagsTraceCase("I64", []int{2, 2})},
		{name: "trace-in-max-new", cmd: "exec", want: "-max-new-tokens has no effect with -trace-in", setup: flagsTraceCase("I64", []int{1, 2}, "-max-new-tokens", "3")},
		{name: "token-map-range", cmd: "exec", want: `engram_token_map.safetensors: tensor "token_map": entry 7 is 400, want a compressed id in [0, engram_compressed_vocab_size = 400) or -1`, setup: flagsTokenMap(func(v []int64, _ map[string]string) { v[7] = 400 })},
		{name: "token-map-pad", cmd: "exec", want: `tensor "token_map": entry 2 (engram_pad_id) is -1, want a compressed id`, setup: flagsTokenMap(func(v []int64, _ map[string]string) { v[2] = -1 })},
		{name: "token-map-metadata", cmd: "exec", want: `tensor "token_map": metadata compressed_vocab_size is 300, the config says 400`, setup: flagsTokenMap(func(_ []int64, m map[string]string) { m["compressed_vocab_size"] = "300" })},
		{name: "plan-model-dir-moved", cmd: "exec", want: "recorded in plan ", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			dir := copyTinyCheckpoint(t, in)
			p := filepath.Join(in, "moved.plan")
			if r := errsRun(t, fx, in, "compile", "-model", dir, "-o", p); r.code != 0 {
				t.Fatalf("compile: %s", r.stderr)
			}
			if err := os.Rename(dir, dir+".moved"); err != nil {
				t.Fatal(err)
			}
			return []string{"-plan", p, "-prompt-ids", "1"}
		}},
	}...)
}

// flagsTimingOnly reports whether stderr of a good exec holds only its
// timing lines (the results go to stdout).
func flagsTimingOnly(stderr string) bool {
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if !strings.HasPrefix(l, "prefill: ") && !strings.HasPrefix(l, "decode: ") {
			return false
		}
	}
	return stderr != ""
}

// The results (row N: ids) go to stdout, the timing lines to stderr, so
// that `exec ... > ids.txt` holds only the results.
func TestExecTimingOnStderr(t *testing.T) {
	plan := tinyPlan(t)
	r := runBin(t, "exec", "-plan", plan, "-prompt-ids", "1,2,3;4,5,6", "-max-new-tokens", "3")
	if r.code != 0 {
		t.Fatalf("exec: status %d: %s", r.code, r.stderr)
	}
	if ok, _ := regexp.MatchString(`^row 0: \d+,\d+,\d+\nrow 1: \d+,\d+,\d+\n$`, r.stdout); !ok {
		t.Errorf("stdout is not just the rows: %q", r.stdout)
	}
	if !flagsTimingOnly(r.stderr) || !strings.Contains(r.stderr, "prefill: 6 tokens in ") || !strings.Contains(r.stderr, "decode: 2 steps × 2 rows in ") {
		t.Errorf("stderr is not the two timing lines: %q", r.stderr)
	}
}

// -h lists every flag, in the synopsis and in the flag list, and exits 0
// with nothing on stderr.
func TestHelpNamesEveryFlag(t *testing.T) {
	for _, name := range []string{"compile", "exec"} {
		r := runBin(t, name, "-h")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s -h: status %d, stderr %q", name, r.code, r.stderr)
		}
		synopsis, list, ok := strings.Cut(r.stdout, "\nflags:\n")
		if !ok {
			t.Fatalf("%s -h: no flag list:\n%s", name, r.stdout)
		}
		flags := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(list, -1)
		if len(flags) < 12 {
			t.Fatalf("%s -h: %d flags listed, want at least 12:\n%s", name, len(flags), list)
		}
		for _, f := range flags {
			if !regexp.MustCompile(`[\[( ]-` + regexp.QuoteMeta(f[1]) + `[\] |)\n]`).MatchString(synopsis + "\n") {
				t.Errorf("%s -h: the synopsis does not name -%s:\n%s", name, f[1], synopsis)
			}
		}
	}
}

// The smallest temperature accepted samples (exit 0), with a seed; a
// Hugging Face config's unknown key (not a misspelling) compiles with a
// note naming it.
func TestFlagsAcceptedEdges(t *testing.T) {
	plan := tinyPlan(t)
	r := runBin(t, "exec", "-plan", plan, "-prompt-ids", "1,2,3", "-max-new-tokens", "2", "-temperature", "1e-6", "-seed", "3")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "row 0: ") {
		t.Errorf("exec -temperature 1e-6: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(), "models", "deepseekv4", "testdata", "configs", "hf-deepseek-v41-flash.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["some_future_key"] = json.RawMessage("1")
	b, _ = json.Marshal(m)
	dir := t.TempDir()
	cfg := errsWrite(t, filepath.Join(dir, "config.json"), string(b))
	r = runBin(t, "compile", "-config", cfg, "-explain")
	if r.code != 0 || !strings.Contains(r.stderr, "config.json: keys not used by the text model (ignored): some_future_key\n") {
		t.Errorf("compile of an HF config with an unknown key: status %d, stderr %q", r.code, r.stderr)
	}
}
