package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.plan")
	if err := Write(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("content %q", b)
	}
	// Renaming over a directory fails: the old content stays, no temp file.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := Write(sub, []byte("x")); err == nil {
		t.Fatal("wrote over a directory")
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x")); err == nil {
		t.Fatal("wrote into a missing directory")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("directory holds %d entries, want x.plan and sub", len(ents))
	}
}
