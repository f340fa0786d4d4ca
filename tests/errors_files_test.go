package tests

// The "Files: outputs and inputs" entries of docs/errors.md (internal/fileio):
// inputs must be bounded regular files, outputs never destroy what is not
// theirs (devices written in place, directories, FIFOs and inputs refused),
// and an interrupted or failed command leaves no temporary or partial file.
// Catalogue entries run in TestErrorCatalogue; device outputs, signals and
// a synth failing mid-write have tests of their own below.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	filesSynthOnce sync.Once
	filesSynthErr  error
)

// filesSynth builds cmd/synth next to compile and exec (TestMain builds
// only those two).
func filesSynth(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	filesSynthOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "synth"), "./cmd/synth")
		cmd.Dir = repoRoot()
		if b, err := cmd.CombinedOutput(); err != nil {
			filesSynthErr = fmt.Errorf("go build ./cmd/synth: %v\n%s", err, b)
		}
	})
	if filesSynthErr != nil {
		t.Fatal(filesSynthErr)
	}
}

// filesFIFO makes a named pipe at p.
func filesFIFO(t *testing.T, p string) string {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// filesSparse makes a file of n zero bytes at p that starts with head,
// without writing n bytes.
func filesSparse(t *testing.T, p, head string, n int64) string {
	t.Helper()
	errsWrite(t, p, head)
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
	return p
}

// filesCopy copies src to dst.
func filesCopy(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func init() {
	errsCases = append(errsCases, []errsCase{
		// ---- inputs: regular files only, bounded ----
		{name: "plan-device", cmd: "exec", want: "/dev/zero: not a regular file (a character device)", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-plan", "/dev/zero", "-model", fx.goodDir, "-prompt-ids", "1"}
		}},
		{name: "config-device", cmd: "compile", want: "config: /dev/zero: not a regular file (a character device)", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return errsCompileArgs("-config", "/dev/zero")
		}},
		{name: "plan-fifo", cmd: "exec", want: "p.plan: not a regular file (a named pipe)", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-plan", filesFIFO(t, filepath.Join(in, "p.plan")), "-model", fx.goodDir, "-prompt-ids", "1"}
		}},
		{name: "plan-is-dir", cmd: "exec", want: "p.plan: is a directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			p := filepath.Join(in, "p.plan")
			os.Mkdir(p, 0o755)
			return []string{"-plan", p, "-model", fx.goodDir, "-prompt-ids", "1"}
		}},
		{name: "plan-too-large", cmd: "exec", want: "big.plan: larger than 64 MiB, the limit for this file", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-plan", filesSparse(t, filepath.Join(in, "big.plan"), "DS4PLAN 1\n", 64<<20+1), "-model", fx.goodDir, "-prompt-ids", "1"}
		}},
		{name: "config-too-large", cmd: "compile", want: "big.json: larger than 1 MiB, the limit for this file", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return errsCompileArgs("-config", filesSparse(t, filepath.Join(in, "big.json"), "{", 1<<20+1))
		}},
		{name: "shard-fifo", cmd: "exec", want: errsShard2 + ": not a regular file (a named pipe)", setup: errsExecModel(func(t *testing.T, dir string) {
			p := filepath.Join(dir, errsShard2)
			os.Remove(p)
			filesFIFO(t, p)
		})},
		{name: "index-fifo", cmd: "exec", want: "model.safetensors.index.json: not a regular file (a named pipe)", setup: errsExecModel(func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors.index.json")
			os.Remove(p)
			filesFIFO(t, p)
		})},

		// ---- outputs: never an input, a directory or a FIFO ----
		{name: "compile-output-is-config", cmd: "compile", want: "c.json; choose another output", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			c := filesCopy(t, filepath.Join(tinyDir(), "config.json"), filepath.Join(in, "c.json"))
			return []string{"-config", c, "-o", c}
		}},
		{name: "compile-output-is-model-config", cmd: "compile", want: "config.json: is the input ", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			dir := copyTinyCheckpoint(t, in)
			return []string{"-model", dir, "-o", filepath.Join(dir, "config.json")}
		}},
		{name: "compile-output-fifo", cmd: "compile", want: "out.plan: is a named pipe; give a regular file or a device", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-model", fx.goodDir, "-o", filesFIFO(t, filepath.Join(in, "out.plan"))}
		}},
		{name: "compile-output-read-only", cmd: "compile", want: "x.plan: permission denied", unprivileged: true, setup: func(t *testing.T, fx *errsFixture, in string) []string {
			// The directory is writable: only the check of the file itself
			// stops the rename over a file its owner made read-only.
			d := filepath.Join(in, "ro")
			os.Mkdir(d, 0o777)
			os.Chmod(d, 0o777)
			p := errsWrite(t, filepath.Join(d, "x.plan"), "keep")
			os.Chmod(p, 0o444)
			return []string{"-model", fx.goodDir, "-o", p}
		}},
		{name: "compile-dump-dir-model", cmd: "compile", want: "-dump-dir …: holds the input …/config.json; choose another output directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			dir := copyTinyCheckpoint(t, in)
			return []string{"-model", dir, "-dump-after", "all", "-dump-dir", dir}
		}},
		{name: "compile-dumps-on-failure", cmd: "compile", want: "-o /dev/full: no space left on device", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			// The -dump-after files were all written when the plan fails:
			// the harness checks that the dump directory went with it.
			if _, err := os.Stat("/dev/full"); err != nil {
				t.Skip("no /dev/full on this system")
			}
			return []string{"-model", fx.goodDir, "-dump-after", "all", "-dump-dir", "dumps", "-o", "/dev/full"}
		}},
		{name: "dump-is-plan", cmd: "exec", want: "p.plan; choose another output", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			p := filesCopy(t, fx.goodPlan, filepath.Join(in, "p.plan"))
			return []string{"-plan", p, "-model", fx.goodDir, "-prompt-ids", "1,2", "-dump", p}
		}},
		{name: "dump-is-shard", cmd: "exec", want: errsShard1 + "; choose another output", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			dir := copyTinyCheckpoint(t, in)
			return []string{"-plan", fx.goodPlan, "-model", dir, "-prompt-ids", "1,2", "-dump", filepath.Join(dir, errsShard1)}
		}},
		{name: "cpuprofile-is-shard", cmd: "exec", want: errsShard2 + "; choose another output", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			// The profile starts before the checkpoint is opened: checked again after.
			dir := copyTinyCheckpoint(t, in)
			return []string{"-plan", fx.goodPlan, "-model", dir, "-prompt-ids", "1,2", "-cpuprofile", filepath.Join(dir, errsShard2)}
		}},
		{name: "trace-out-is-trace-in", cmd: "exec", want: "g.safetensors; choose another output", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			g := filesCopy(t, filepath.Join(tinyDir(), "golden.safetensors"), filepath.Join(in, "g.safetensors"))
			return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-trace-in", g, "-trace-out", g}
		}},
		{name: "dump-is-trace-out", cmd: "exec", want: "-trace-out out.safetensors: is already an output of this command; give each output its own file", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-prompt-ids", "1,2", "-dump", "out.safetensors", "-trace-out", "out.safetensors"}
		}},
		{name: "dump-is-dir", cmd: "exec", want: filepath.Join("d", "x") + ": is a directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			d := filepath.Join(in, "d", "x")
			os.MkdirAll(filepath.Join(d, "sub"), 0o755)
			return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-prompt-ids", "1,2", "-dump", d}
		}},
		{name: "dump-fifo", cmd: "exec", want: "d.safetensors: is a named pipe; give a regular file or a device", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-prompt-ids", "1,2", "-dump", filesFIFO(t, filepath.Join(in, "d.safetensors"))}
		}},
		{name: "dump-device-full", cmd: "exec", want: "-dump /dev/full: no space left on device", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			if _, err := os.Stat("/dev/full"); err != nil {
				t.Skip("no /dev/full on this system")
			}
			return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-prompt-ids", "1,2", "-max-new-tokens", "1", "-dump", "/dev/full"}
		}},
		{name: "synth-output-config-dir", cmd: "synth", want: "config.json; choose another output directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			filesSynth(t)
			dir := copyTinyCheckpoint(t, in)
			return []string{"-config", filepath.Join(dir, "config.json"), "-o", dir}
		}},
		{name: "synth-output-checkpoint", cmd: "synth", want: "config.json; choose another output directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			filesSynth(t)
			dir := copyTinyCheckpoint(t, in)
			return []string{"-config", dir, "-o", dir}
		}},
		{name: "synth-output-is-file", cmd: "synth", want: "f: not a directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			filesSynth(t)
			return []string{"-config", filepath.Join(tinyDir(), "config.json"), "-o", errsWrite(t, filepath.Join(in, "f"), "x")}
		}},
	}...)
}

// filesRun runs a built command and returns its result.
func filesRun(t *testing.T, dir, name string, args ...string) errsResult {
	t.Helper()
	return errsRun(t, &errsFixture{bin: binDir}, dir, name, args...)
}

// TestFilesDeviceOutputs: an output that is a device is written in place,
// as cp does. As root (CI) the null device is one made with mknod in a
// temporary directory, so that a regression (the rename of a temporary file
// over the device) cannot replace the real /dev/null; otherwise it is
// /dev/null, whose directory an unprivileged process cannot write.
func TestFilesDeviceOutputs(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	work := t.TempDir()
	null := "/dev/null"
	if os.Geteuid() == 0 {
		null = filepath.Join(t.TempDir(), "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatalf("mknod as root: %v", err)
		}
	}
	isDevice := func() {
		t.Helper()
		st, err := os.Lstat(null)
		if err != nil || st.Mode()&fs.ModeCharDevice == 0 {
			t.Fatalf("%s is no longer a character device (%v, %v)", null, st.Mode(), err)
		}
	}
	plan := filepath.Join(work, "p.plan")
	if r := filesRun(t, work, "compile", "-model", tinyDir(), "-o", plan); r.code != 0 {
		t.Fatalf("compile: %s", r.stderr)
	}
	if r := filesRun(t, work, "compile", "-model", tinyDir(), "-o", null); r.code != 0 || r.stderr != "" {
		t.Errorf("compile -o %s: exit %d, %q", null, r.code, r.stderr)
	}
	isDevice()
	r := filesRun(t, work, "exec", "-plan", plan, "-prompt-ids", "1,2", "-max-new-tokens", "2", "-dump", null, "-trace-out", null)
	if r.code != 0 || strings.Contains(r.stderr, "exec: ") || !strings.Contains(r.stdout, "row 0: ") {
		t.Errorf("exec -dump %s -trace-out %[1]s: exit %d, stdout %q, stderr %q", null, r.code, r.stdout, r.stderr)
	}
	isDevice()
	if _, err := os.Stat("/dev/full"); err == nil {
		r := filesRun(t, work, "compile", "-model", tinyDir(), "-o", "/dev/full")
		errsCheckOneLine(t, "compile", r, 2, "-o /dev/full: no space left on device")
	}
	if ents, _ := os.ReadDir(work); len(ents) != 1 {
		t.Errorf("the working directory holds %d entries, want the plan only", len(ents))
	}
}

// filesSignalConfig writes a config whose synth writes about 180 MB, which
// takes seconds on CI's 2 cores, time enough to be interrupted midway.
func filesSignalConfig(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "unseen6", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["dim"], c["moe_inter_dim"], c["n_routed_experts"] = 1024, 512, 32
	b, _ = json.Marshal(c)
	return errsWrite(t, filepath.Join(dir, "big.json"), string(b))
}

// filesWaitShard waits until synth has begun writing a shard somewhere
// under root (in its temporary directory), and fails after a minute.
func filesWaitShard(t *testing.T, root string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		found := false
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".safetensors") && strings.Contains(p, ".tmp") {
				found = true
			}
			return nil
		})
		if found {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("synth wrote no shard within a minute")
}

// TestFilesSignal interrupts synth while it writes its shard: SIGINT into a
// new directory (exit 130, nothing left), SIGTERM into an existing one (exit
// 143, its content unchanged). One line on stderr each time.
func TestFilesSignal(t *testing.T) {
	filesSynth(t)
	in := t.TempDir()
	cfg := filesSignalConfig(t, in)
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		code   int
		line   string
		exists bool
	}{
		{"SIGINT", syscall.SIGINT, 130, "synth: interrupted\n", false},
		{"SIGTERM", syscall.SIGTERM, 143, "synth: terminated\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "ck")
			if tc.exists {
				os.Mkdir(out, 0o755)
				errsWrite(t, filepath.Join(out, "config.json"), "old")
				errsWrite(t, filepath.Join(out, "notes"), "keep")
			}
			before := errsListing(t, root)
			cmd := exec.Command(filepath.Join(binDir, "synth"), "-config", cfg, "-o", out, "-workers", "1")
			var so, se bytes.Buffer
			cmd.Stdout, cmd.Stderr = &so, &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			filesWaitShard(t, root)
			cmd.Process.Signal(tc.sig)
			err := cmd.Wait()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != tc.code {
				t.Fatalf("synth ended with %v, want exit status %d; stdout %q, stderr %q", err, tc.code, so.String(), se.String())
			}
			if se.String() != tc.line {
				t.Errorf("stderr %q, want %q", se.String(), tc.line)
			}
			want := ""
			if tc.exists {
				want = before
			}
			if after := filesListingOrEmpty(t, root, tc.exists); after != want {
				t.Errorf("left behind:\n%s\nwant:\n%s", after, want)
			}
		})
	}
}

// filesListingOrEmpty lists root, or returns "" when root holds nothing
// (and nonEmpty is false).
func filesListingOrEmpty(t *testing.T, root string, nonEmpty bool) string {
	t.Helper()
	if ents, _ := os.ReadDir(root); len(ents) == 0 && !nonEmpty {
		return ""
	}
	return errsListing(t, root)
}

// TestFilesSynthFailure: synth failing midway (the shard hits the file-size
// limit, "file too large") leaves no directory behind, leaves an existing
// one as it was, and says so in one line without a doubled "synth:".
func TestFilesSynthFailure(t *testing.T) {
	filesSynth(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set the file-size limit")
	}
	root := t.TempDir()
	existing := filepath.Join(root, "old")
	os.Mkdir(existing, 0o755)
	errsWrite(t, filepath.Join(existing, "config.json"), "old")
	before := errsListing(t, root)
	for _, out := range []string{filepath.Join(root, "new", "ck"), existing} {
		// ulimit -f counts 512-byte blocks in dash and 1024 in bash: either
		// way 1000 stops the 1.6 MB shard of the tiny config.
		cmd := exec.Command("sh", "-c", `ulimit -f 1000 && exec "$0" "$@"`, filepath.Join(binDir, "synth"), "-config", filepath.Join(tinyDir(), "config.json"), "-o", out)
		r := errsRunCmd(t, "synth", cmd)
		errsCheckOneLine(t, "synth", r, 2, "file too large")
		if strings.HasPrefix(r.stderr, "synth: synth:") || strings.Contains(r.stderr, ".tmp") {
			t.Errorf("stderr %q doubles the prefix or names a temporary file", r.stderr)
		}
		if after := errsListing(t, root); after != before {
			t.Errorf("synth -o %s changed the directory:\nbefore:\n%s\nafter:\n%s", out, before, after)
		}
	}
}
