package tests

// The bad-input catalogue of docs/errors.md, run against the built binaries:
// every entry must end with exit status 2, exactly one line on stderr that
// holds the catalogued text, no Go panic trace, no output file left behind,
// and (for exec) an unchanged model directory.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/internal/safetensors"
)

// errsFixture holds the binaries and a good plan, built once per test run.
type errsFixture struct {
	bin      string // directory holding compile and exec (built once by TestMain)
	goodPlan string // compiled from a private copy of testdata/tiny
	goodDir  string // that copy
}

// copyTinyCheckpoint copies the tiny checkpoint (config, index, shards, token map)
// into a new directory under parent.
func copyTinyCheckpoint(t *testing.T, parent string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "model")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(tinyDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n := e.Name()
		if n != "config.json" && n != "engram_token_map.safetensors" && !strings.HasPrefix(n, "model") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(tinyDir(), n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// errsListing is a snapshot of a directory tree: path -> size, mode, mtime.
func errsListing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if fi.IsDir() { // a directory's mtime moves when a temporary file comes and goes
			lines = append(lines, fmt.Sprintf("%s %v", rel, fi.Mode()))
			return nil
		}
		lines = append(lines, fmt.Sprintf("%s %d %v %d", rel, fi.Size(), fi.Mode(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

type errsResult struct {
	code           int
	stdout, stderr string
}

// errsRun runs a built command in dir.
func errsRun(t *testing.T, fx *errsFixture, dir, name string, args ...string) errsResult {
	t.Helper()
	cmd := exec.Command(filepath.Join(fx.bin, name), args...)
	cmd.Dir = dir
	return errsRunCmd(t, name, cmd)
}

// errsRunCmd runs cmd and collects its status and output.
func errsRunCmd(t *testing.T, name string, cmd *exec.Cmd) errsResult {
	t.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := errsResult{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// errsCheckOneLine checks the shape of a bad-input failure.
func errsCheckOneLine(t *testing.T, name string, r errsResult, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d\nstderr: %s", r.code, code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not exactly one line: %q", r.stderr)
	}
	if !strings.HasPrefix(r.stderr, name+": ") {
		t.Errorf("stderr does not start with %q: %q", name+": ", r.stderr)
	}
	for _, bad := range []string{"goroutine", "panic", "runtime error"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr holds %q: %s", bad, r.stderr)
		}
	}
	if !containsInOrder(r.stderr, want) {
		t.Errorf("stderr %q does not contain %q", r.stderr, want)
	}
}

// containsInOrder reports whether s holds the parts of want between its
// "…" (as docs/errors.md writes a path or value that varies) in order.
func containsInOrder(s, want string) bool {
	for part := range strings.SplitSeq(want, "…") {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

// errsRewrite rewrites one shard of dir through edit, which may change,
// drop or add tensors (the index is updated for dropped ones).
func errsRewrite(t *testing.T, dir, shard string, edit func(ts []safetensors.WriteTensor) []safetensors.WriteTensor) {
	t.Helper()
	p := filepath.Join(dir, shard)
	f, err := safetensors.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.WriteTensor
	for _, n := range f.Names() {
		x, _ := f.Get(n)
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: x.DType, Shape: append([]int(nil), x.Shape...), Data: append([]byte(nil), x.Data...)})
	}
	meta := f.Metadata
	f.Close()
	ts = edit(ts)
	keep := map[string]bool{}
	for _, x := range ts {
		keep[x.Name] = true
	}
	if err := safetensors.WriteFile(p, ts, meta); err != nil {
		t.Fatal(err)
	}
	idxPath := filepath.Join(dir, safetensors.IndexFile)
	b, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string]any
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	wm := idx["weight_map"].(map[string]any)
	for n, sh := range wm {
		if sh == shard && !keep[n] {
			delete(wm, n)
		}
	}
	b, _ = json.Marshal(idx)
	if err := os.WriteFile(idxPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// errsEditTensor applies fn to the named tensor of a shard.
func errsEditTensor(t *testing.T, dir, shard, name string, fn func(x *safetensors.WriteTensor)) {
	t.Helper()
	found := false
	errsRewrite(t, dir, shard, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i := range ts {
			if ts[i].Name == name {
				fn(&ts[i])
				found = true
			}
		}
		return ts
	})
	if !found {
		t.Fatalf("%s has no tensor %s", shard, name)
	}
}

// errsEditHeader rewrites the JSON header of a shard (data untouched).
func errsEditHeader(t *testing.T, path string, fn func(h map[string]map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		t.Fatal(err)
	}
	h := map[string]map[string]any{}
	out := map[string]any{}
	for k, v := range raw {
		if k == "__metadata__" {
			out[k] = v
			continue
		}
		var e map[string]any
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatal(err)
		}
		h[k] = e
	}
	fn(h)
	for k, v := range h {
		out[k] = v
	}
	hdr, _ := json.Marshal(out)
	nb := make([]byte, 8, 8+len(hdr)+len(b))
	binary.LittleEndian.PutUint64(nb, uint64(len(hdr)))
	nb = append(append(nb, hdr...), b[8+n:]...)
	if err := os.WriteFile(path, nb, 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	errsShard1 = "model-00001-of-00002.safetensors"
	errsShard2 = "model-00002-of-00002.safetensors"
)

// errsCase is one catalogue entry. setup prepares inputs under in (the
// model copy, when it needs one, comes from fx.model(t, in)) and returns the
// arguments; the command runs in an empty directory that must stay empty.
type errsCase struct {
	name  string // the entry's name in docs/errors.md
	cmd   string // compile or exec
	want  string // stable substring of the one-line message (… stands for any text)
	code  int    // 0 means 2
	setup func(t *testing.T, fx *errsFixture, in string) []string
	// unprivileged runs the command as an unprivileged user when the test
	// runs as root (errsRunUnprivileged), whom file permissions do not bind.
	unprivileged bool
}

// errsArg returns the value following flag in args.
func errsArg(args []string, flag string) string {
	for i := range args[:len(args)-1] {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// errsExecModel runs exec of the good plan against a broken model copy.
func errsExecModel(edit func(t *testing.T, dir string)) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		dir := copyTinyCheckpoint(t, in)
		edit(t, dir)
		return []string{"-plan", fx.goodPlan, "-model", dir, "-prompt-ids", "1,2,3", "-max-new-tokens", "2", "-dump", "out.safetensors", "-trace-out", "trace.safetensors"}
	}
}

// errsExecGood runs exec of the good plan and model with extra flags.
func errsExecGood(extra ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return append([]string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-dump", "out.safetensors", "-trace-out", "trace.safetensors"}, extra...)
	}
}

func errsWrite(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func errsCompileArgs(extra ...string) []string {
	return append(extra, "-o", "out.plan", "-dump-after", "all", "-dump-dir", "dumps")
}

var errsCases = []errsCase{
	// ---- compile ----
	{name: "config-missing", cmd: "compile", want: "config: stat …nope.json: no such file or directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-config", filepath.Join(in, "nope.json"))
	}},
	{name: "config-unreadable", cmd: "compile", want: "not a directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		f := errsWrite(t, filepath.Join(in, "file"), "x")
		return errsCompileArgs("-config", filepath.Join(f, "config.json"))
	}},
	{name: "config-permission", cmd: "compile", want: "permission denied", unprivileged: true, setup: func(t *testing.T, fx *errsFixture, in string) []string {
		f := errsWrite(t, filepath.Join(in, "config.json"), "{}")
		os.Chmod(f, 0)
		return errsCompileArgs("-config", f)
	}},
	{name: "config-invalid-json", cmd: "compile", want: "invalid JSON at byte", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-config", errsWrite(t, filepath.Join(in, "c.json"), `{"dim": 128,`))
	}},
	{name: "config-invalid-value", cmd: "compile", want: "dim: is 100, want a multiple of 32", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		b, _ := os.ReadFile(filepath.Join(tinyDir(), "config.json"))
		return errsCompileArgs("-config", errsWrite(t, filepath.Join(in, "c.json"), strings.Replace(string(b), `"dim": 128`, `"dim": 100`, 1)))
	}},
	{name: "model-dir-missing", cmd: "compile", want: "-model: stat …nope: no such file or directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-model", filepath.Join(in, "nope"))
	}},
	{name: "model-dir-not-dir", cmd: "compile", want: "not a directory (give the checkpoint directory)", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-model", filepath.Join(tinyDir(), "config.json"))
	}},
	{name: "model-dir-no-config", cmd: "compile", want: "config: stat …/config.json: no such file or directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-model", in)
	}},
	{name: "compile-max-batch-negative", cmd: "compile", want: "-max-batch -1: must be >= 0", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return errsCompileArgs("-model", fx.goodDir, "-max-batch", "-1")
	}},
	{name: "compile-unknown-flag", cmd: "compile", want: "flag provided but not defined: -nope", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return []string{"-nope"}
	}},
	{name: "compile-output-dir-missing", cmd: "compile", want: "-o " + filepath.Join("missing", "out.plan") + ": directory missing does not exist", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return []string{"-model", fx.goodDir, "-o", filepath.Join("missing", "out.plan")}
	}},
	{name: "compile-output-is-dir", cmd: "compile", want: "x.plan: is a directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		// Refused before any work; the directory keeps its content.
		d := filepath.Join(in, "out")
		if err := os.MkdirAll(filepath.Join(d, "x.plan", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{"-model", fx.goodDir, "-o", filepath.Join(d, "x.plan")}
	}},

	// ---- exec: plan ----
	{name: "plan-missing", cmd: "exec", want: "no such file or directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return []string{"-plan", filepath.Join(in, "nope.plan"), "-prompt-ids", "1"}
	}},
	{name: "plan-not-a-plan", cmd: "exec", want: "not a plan file", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return []string{"-plan", errsWrite(t, filepath.Join(in, "x.plan"), "hello\nworld\n"), "-prompt-ids", "1"}
	}},
	{name: "plan-format-version", cmd: "exec", want: "plan format version 1, this build reads version 2: recompile the plan", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		b, _ := os.ReadFile(fx.goodPlan)
		_, rest, _ := bytes.Cut(b, []byte("\n"))
		b = append([]byte("DS4PLAN 1\n"), rest...) // a plan of the previous format
		return []string{"-plan", errsWrite(t, filepath.Join(in, "v2.plan"), string(b)), "-model", fx.goodDir, "-prompt-ids", "1"}
	}},
	{name: "plan-truncated", cmd: "exec", want: ": plan graphs: line ", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		b, _ := os.ReadFile(fx.goodPlan)
		return []string{"-plan", errsWrite(t, filepath.Join(in, "t.plan"), string(b[:len(b)/2])), "-model", fx.goodDir, "-prompt-ids", "1"}
	}},
	{name: "plan-max-batch-negative", cmd: "exec", want: "plan header: max_batch -3, want >= 0", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		b, _ := os.ReadFile(fx.goodPlan)
		b = bytes.Replace(b, []byte(`{"format_version":2,`), []byte(`{"format_version":2,"max_batch":-3,`), 1)
		return []string{"-plan", errsWrite(t, filepath.Join(in, "mb.plan"), string(b)), "-model", fx.goodDir, "-prompt-ids", "1"}
	}},
	{name: "plan-other-config", cmd: "exec", want: "plan was compiled for config ", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		b, _ := os.ReadFile(filepath.Join(tinyDir(), "config.json"))
		c := errsWrite(t, filepath.Join(in, "c.json"), strings.Replace(string(b), `"route_scale": 1.5`, `"route_scale": 2.5`, 1))
		p := filepath.Join(in, "other.plan")
		if r := errsRun(t, fx, in, "compile", "-config", c, "-o", p); r.code != 0 {
			t.Fatalf("compile: %s", r.stderr)
		}
		return []string{"-plan", p, "-model", fx.goodDir, "-prompt-ids", "1"}
	}},
	{name: "plan-shape-only", cmd: "exec", want: "was compiled shape-only: give -model DIR", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		p := filepath.Join(in, "shape.plan")
		if r := errsRun(t, fx, in, "compile", "-config", filepath.Join(tinyDir(), "config.json"), "-o", p); r.code != 0 {
			t.Fatalf("compile: %s", r.stderr)
		}
		return []string{"-plan", p, "-prompt-ids", "1"}
	}},

	// ---- exec: checkpoint ----
	{name: "exec-model-dir-missing", cmd: "exec", want: "config: stat …nope/config.json: no such file or directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return []string{"-plan", fx.goodPlan, "-model", filepath.Join(in, "nope"), "-prompt-ids", "1"}
	}},
	{name: "shard-missing", cmd: "exec", want: "shard " + errsShard2 + " (tensor ", setup: errsExecModel(func(t *testing.T, dir string) {
		os.Remove(filepath.Join(dir, errsShard2))
	})},
	{name: "shard-unreadable", cmd: "exec", want: errsShard2 + ": is a directory", setup: errsExecModel(func(t *testing.T, dir string) {
		p := filepath.Join(dir, errsShard2)
		os.Remove(p)
		os.Mkdir(p, 0o755)
	})},
	{name: "shard-permission", cmd: "exec", want: errsShard2 + ": permission denied", unprivileged: true, setup: errsExecModel(func(t *testing.T, dir string) {
		os.Chmod(filepath.Join(dir, errsShard2), 0)
	})},
	{name: "shard-truncated", cmd: "exec", want: "end beyond the data area", setup: errsExecModel(func(t *testing.T, dir string) {
		p := filepath.Join(dir, errsShard1)
		st, _ := os.Stat(p)
		if err := os.Truncate(p, st.Size()-100); err != nil {
			t.Fatal(err)
		}
	})},
	{name: "shard-header-length", cmd: "exec", want: "exceeds the file size", setup: errsExecModel(func(t *testing.T, dir string) {
		p := filepath.Join(dir, errsShard1)
		b, _ := os.ReadFile(p)
		binary.LittleEndian.PutUint64(b, uint64(len(b))) // < 100 MB but past the end
		os.WriteFile(p, b, 0o644)
	})},
	{name: "shard-header-json", cmd: "exec", want: "invalid JSON header", setup: errsExecModel(func(t *testing.T, dir string) {
		p := filepath.Join(dir, errsShard1)
		b, _ := os.ReadFile(p)
		b[9] = '!'
		os.WriteFile(p, b, 0o644)
	})},
	{name: "shard-overlap", cmd: "exec", want: "overlaps tensor", setup: errsExecModel(func(t *testing.T, dir string) {
		errsEditHeader(t, filepath.Join(dir, errsShard1), func(h map[string]map[string]any) {
			// Move the second tensor of the data area one byte back.
			type sp struct {
				name string
				b, e float64
			}
			var s []sp
			for n, e := range h {
				o := e["data_offsets"].([]any)
				s = append(s, sp{n, o[0].(float64), o[1].(float64)})
			}
			sort.Slice(s, func(i, j int) bool { return s[i].b < s[j].b })
			h[s[1].name]["data_offsets"] = []float64{s[1].b - 1, s[1].e - 1}
		})
	})},
	{name: "tensor-dtype", cmd: "exec", want: `tensor "layers.0.attn.wq_a.weight" has dtype I8, want F8_E4M3`, setup: errsExecModel(func(t *testing.T, dir string) {
		errsEditTensor(t, dir, errsShard1, "layers.0.attn.wq_a.weight", func(x *safetensors.WriteTensor) { x.DType = "I8" })
	})},
	{name: "tensor-shape", cmd: "exec", want: `tensor "layers.0.attn.wq_a.weight" has shape [128 64], want [64 128]`, setup: errsExecModel(func(t *testing.T, dir string) {
		errsEditTensor(t, dir, errsShard1, "layers.0.attn.wq_a.weight", func(x *safetensors.WriteTensor) { x.Shape = []int{128, 64} })
	})},
	{name: "tensor-missing", cmd: "exec", want: `tensor "layers.0.attn.kv_norm.weight" is missing from the checkpoint`, setup: errsExecModel(func(t *testing.T, dir string) {
		errsRewrite(t, dir, errsShard1, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			var out []safetensors.WriteTensor
			for _, x := range ts {
				if x.Name != "layers.0.attn.kv_norm.weight" {
					out = append(out, x)
				}
			}
			return out
		})
	})},
	{name: "scale-nan", cmd: "exec", want: `tensor "layers.0.attn.wq_a.scale": NaN scale at element 3`, setup: errsExecModel(func(t *testing.T, dir string) {
		errsEditTensor(t, dir, errsShard1, "layers.0.attn.wq_a.scale", func(x *safetensors.WriteTensor) { x.Data[3] = 0xFF })
	})},
	{name: "weight-nan", cmd: "exec", want: `tensor "layers.0.attn.q_norm.weight": non-finite value at element 5`, setup: errsExecModel(func(t *testing.T, dir string) {
		errsEditTensor(t, dir, errsShard1, "layers.0.attn.q_norm.weight", func(x *safetensors.WriteTensor) {
			binary.LittleEndian.PutUint16(x.Data[10:], 0x7FC0) // bf16 NaN
		})
	})},
	{name: "weight-inf", cmd: "exec", want: `tensor "layers.0.attn.q_norm.weight": non-finite value at element 0`, setup: errsExecModel(func(t *testing.T, dir string) {
		errsEditTensor(t, dir, errsShard1, "layers.0.attn.q_norm.weight", func(x *safetensors.WriteTensor) {
			binary.LittleEndian.PutUint16(x.Data, 0xFF80) // bf16 -Inf
		})
	})},
	{name: "token-map-missing", cmd: "exec", want: "Engram token map: safetensors: open …engram_token_map.safetensors: no such file or directory", setup: errsExecModel(func(t *testing.T, dir string) {
		os.Remove(filepath.Join(dir, "engram_token_map.safetensors"))
	})},
	{name: "config-checkpoint-mismatch", cmd: "exec", want: `tensor "embed.weight" has shape [512 128], want [512 256]`, setup: func(t *testing.T, fx *errsFixture, in string) []string {
		// dim changed in config.json: the plan compiled from it wants
		// other shapes than the checkpoint holds.
		dir := copyTinyCheckpoint(t, in)
		c := filepath.Join(dir, "config.json")
		b, _ := os.ReadFile(c)
		errsWrite(t, c, strings.Replace(string(b), `"dim": 128`, `"dim": 256`, 1))
		p := filepath.Join(in, "dim.plan")
		if r := errsRun(t, fx, in, "compile", "-model", dir, "-o", p); r.code != 0 {
			t.Fatalf("compile: %s", r.stderr)
		}
		return []string{"-plan", p, "-model", dir, "-prompt-ids", "1,2", "-dump", "out.safetensors"}
	}},

	// ---- exec: run options ----
	{name: "backend-cuda", cmd: "exec", want: "backend cuda: unavailable: ", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		if driver.Probe() == nil {
			t.Skip("a usable GPU is here: -backend cuda runs")
		}
		return errsExecGood("-prompt-ids", "1,2", "-backend", "cuda")(t, fx, in)
	}},
	{name: "backend-unknown", cmd: "exec", want: `backend "nope" is not available`, setup: errsExecGood("-prompt-ids", "1,2", "-backend", "nope")},
	{name: "token-id-too-large", cmd: "exec", want: "token id 512 (row 0, position 1) out of range [0,512)", setup: errsExecGood("-prompt-ids", "1,512")},
	{name: "token-id-negative", cmd: "exec", want: "token id -1 (row 1, position 0) out of range [0,512)", setup: errsExecGood("-prompt-ids", "1,2;-1,3")},
	{name: "prompt-not-ids", cmd: "exec", want: `-prompt-ids: row 0: "x" is not a token id`, setup: errsExecGood("-prompt-ids", "1,x")},
	{name: "prompt-ragged", cmd: "exec", want: "row 1 has 1 ids, row 0 has 2", setup: errsExecGood("-prompt-ids", "1,2;3")},
	{name: "prompt-missing", cmd: "exec", want: "give -prompt TEXT, -prompt-file FILE, -chat, -prompt-ids IDS or -trace-in FILE", setup: errsExecGood()},
	{name: "prompt-too-long", cmd: "exec", want: "prompt of 5 tokens + 8 new tokens exceeds -max-len 10", setup: errsExecGood("-prompt-ids", "1,2,3,4,5", "-max-len", "10")},
	{name: "batch-too-large", cmd: "exec", want: "batch of 3 rows exceeds the plan's max_batch 2", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		p := filepath.Join(in, "mb.plan")
		if r := errsRun(t, fx, in, "compile", "-model", fx.goodDir, "-max-batch", "2", "-o", p); r.code != 0 {
			t.Fatalf("compile: %s", r.stderr)
		}
		return []string{"-plan", p, "-prompt-ids", "1;2;3", "-dump", "out.safetensors"}
	}},
	// 10^10 rather than the 10^8 of docs/errors.md, so that the test refuses
	// on hosts with more than 114 GiB available too.
	{name: "memory-max-len", cmd: "exec", want: "and maximum length 10000000000 needs ", setup: errsExecGood("-prompt-ids", "1,2", "-max-len", "10000000000")},
	{name: "memory-limit", cmd: "exec", want: "more than the -max-memory limit of 10240 bytes", setup: errsExecGood("-prompt-ids", "1,2", "-max-memory", "10K")},
	{name: "memory-limit-syntax", cmd: "exec", want: `invalid value "lots" for flag -max-memory`, setup: errsExecGood("-prompt-ids", "1,2", "-max-memory", "lots")},
	{name: "max-new-negative", cmd: "exec", want: "-max-new-tokens -1: must be ≥ 0", setup: errsExecGood("-prompt-ids", "1,2", "-max-new-tokens", "-1")},
	{name: "temperature-negative", cmd: "exec", want: "-temperature -1: must be ≥ 0", setup: errsExecGood("-prompt-ids", "1,2", "-temperature", "-1")},
	{name: "trace-in-missing", cmd: "exec", want: "no such file or directory", setup: errsExecGood("-trace-in", "nope.safetensors")},
	{name: "dump-dir-missing", cmd: "exec", want: "-dump " + filepath.Join("missing", "d.safetensors") + ": directory missing does not exist", setup: func(t *testing.T, fx *errsFixture, in string) []string {
		return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-prompt-ids", "1,2", "-max-new-tokens", "1", "-dump", filepath.Join("missing", "d.safetensors")}
	}},
}

// errsDoc is the text of docs/errors.md, whose entries each have a test.
func errsDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errsDocEntries lists the entries of doc (docs/errors.md): starred ones run
// outside the harness (starred true), the others in TestErrorCatalogue.
func errsDocEntries(doc string, starred bool) []string {
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)`( \\*)?").FindAllStringSubmatch(doc, -1) {
		if (m[2] != "") == starred {
			names = append(names, m[1])
		}
	}
	return names
}

// TestErrorCatalogue runs every entry of docs/errors.md (one subtest each).
func TestErrorCatalogue(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	root := t.TempDir()
	fx := &errsFixture{bin: binDir}
	fx.goodDir = copyTinyCheckpoint(t, root)
	fx.goodPlan = filepath.Join(root, "good.plan")
	if r := errsRun(t, fx, root, "compile", "-model", fx.goodDir, "-o", fx.goodPlan); r.code != 0 {
		t.Fatalf("compile: %s", r.stderr)
	}
	// The good plan runs.
	if r := errsRun(t, fx, root, "exec", "-plan", fx.goodPlan, "-prompt-ids", "1,2;3,4", "-max-new-tokens", "2"); r.code != 0 || !flagsTimingOnly(r.stderr) {
		t.Fatalf("exec of the good plan: %d %s", r.code, r.stderr)
	}
	goodListing := errsListing(t, fx.goodDir)
	doc := errsDoc(t)
	seen := map[string]bool{}
	for _, c := range errsCases {
		if seen[c.name] {
			t.Fatalf("duplicate entry %s", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(doc, "`"+c.name+"`") {
				t.Errorf("docs/errors.md has no entry `%s`", c.name)
			}
			in := filepath.Join(root, "in", c.name)
			work := filepath.Join(root, "work", c.name)
			for _, d := range []string{in, work} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			args := c.setup(t, fx, in)
			model := errsArg(append(args, ""), "-model")
			var before string
			if c.cmd == "exec" && model != "" {
				if _, err := os.Stat(model); err == nil {
					before = errsListing(t, model)
				}
			}
			inBefore := errsListing(t, in)
			start := time.Now()
			run := errsRun
			if c.unprivileged {
				run = errsRunUnprivileged
			}
			r := run(t, fx, work, c.cmd, args...)
			code := c.code
			if code == 0 {
				code = 2
			}
			errsCheckOneLine(t, c.cmd, r, code, c.want)
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v", d)
			}
			// Nothing written where the command ran, nor next to its inputs.
			if ents, _ := os.ReadDir(work); len(ents) > 0 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("left files behind: %v", names)
			}
			if after := errsListing(t, in); after != inBefore {
				t.Errorf("input directory changed:\nbefore:\n%s\nafter:\n%s", inBefore, after)
			}
			if before != "" {
				if after := errsListing(t, model); after != before {
					t.Errorf("exec changed the model directory:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			}
		})
	}
	if after := errsListing(t, fx.goodDir); after != goodListing {
		t.Errorf("the model directory changed during the catalogue")
	}
	for _, name := range errsDocEntries(doc, false) {
		if !seen[name] {
			t.Errorf("docs/errors.md entry `%s` has no case in errsCases", name)
		}
	}
}
