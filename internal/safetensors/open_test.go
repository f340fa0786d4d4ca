package safetensors

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenNotRegular: a directory or FIFO in the place of a shard or of
// the index is named as such, at once (a FIFO without a writer must not
// block the open).
func TestOpenNotRegular(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "model.safetensors")
	os.Mkdir(sub, 0o755)
	fifo := filepath.Join(dir, "fifo.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	idxDir := filepath.Join(dir, "indexed")
	os.Mkdir(idxDir, 0o755)
	if err := syscall.Mkfifo(filepath.Join(idxDir, IndexFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		open func() error
		want string
	}{
		{func() error { _, err := Open(sub); return err }, sub + ": is a directory"},
		{func() error { _, err := Open(fifo); return err }, fifo + ": not a regular file (a named pipe)"},
		{func() error { _, err := OpenDir(dir); return err }, sub + ": is a directory"},
		{func() error { _, err := OpenDir(idxDir); return err }, IndexFile + ": not a regular file (a named pipe)"},
	} {
		done := make(chan error, 1)
		go func() { done <- tc.open() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("opening for %q blocked", tc.want)
		}
	}
}
