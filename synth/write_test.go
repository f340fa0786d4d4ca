package synth

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestWriteStaged: Write into an existing directory replaces the files it
// writes and keeps the others; one that fails (here at the end, a directory
// where config.json goes) changes nothing and leaves no temporary
// directory; errors name the final path.
func TestWriteStaged(t *testing.T) {
	c, err := deepseekv4.LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("old"), 0o644)
	if err := Write(dir, c, 1, Options{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "engram_token_map.safetensors", "model-00001-of-00001.safetensors", "model.safetensors.index.json", "notes"}
	if got := names(t, dir); !slices.Equal(got, want) {
		t.Fatalf("directory holds %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes")); string(b) != "mine" {
		t.Errorf("notes holds %q", b)
	}

	clash := t.TempDir()
	os.Mkdir(filepath.Join(clash, "config.json"), 0o755)
	os.WriteFile(filepath.Join(clash, "notes"), []byte("mine"), 0o644)
	err = Write(clash, c, 1, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(clash, "config.json")+": is a directory") || strings.Contains(err.Error(), ".tmp") {
		t.Fatalf("error %v, want one naming %s/config.json", err, clash)
	}
	if got := names(t, clash); !slices.Equal(got, []string{"config.json", "notes"}) {
		t.Fatalf("after the failure the directory holds %v", got)
	}

	// A new nested directory appears whole or not at all.
	root := t.TempDir()
	if err := Write(filepath.Join(root, "a", "b"), c, 1, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(root, "a", "b")); len(got) != 4 {
		t.Fatalf("new directory holds %v", got)
	}
	if got := names(t, root); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("root holds %v", got)
	}
}

// TestWorkerPanic: a panic in a generator goroutine (a bug) is caught and
// returned, to be raised on the caller's goroutine where internal/cli turns
// it into an internal error; in the worker it would end the process with a
// trace.
func TestWorkerPanic(t *testing.T) {
	js := []job{{t: &tensor{name: "x.scale", kind: kindScale, shape: []int{1, 32}}, r1: 1}}
	bug, err := runJobs(js, 2, func(j job, sc *scratch) error { return writeJob(nil, 0, j, sc) })
	if bug == nil || err != nil {
		t.Fatalf("runJobs of a scale tensor: bug %v, err %v; want the panic of gen", bug, err)
	}
	if !strings.Contains(fmt.Sprint(bug), "gen of a scale tensor") {
		t.Errorf("bug %v", bug)
	}
}
