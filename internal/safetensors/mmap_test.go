package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestMapFileAligned checks that mapFile maps a file at a 2 MiB boundary
// (so 2 MiB page-cache folios can map as huge pages), with the file's
// bytes, and that it unmaps cleanly; sizes around page boundaries.
func TestMapFileAligned(t *testing.T) {
	for _, size := range []int{8, 4095, 4096, 4097, hugePage + 123} {
		p := filepath.Join(t.TempDir(), "f")
		want := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, size/7+1)[:size]
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := mapFile(int(fd.Fd()), size)
		fd.Close()
		if err != nil {
			t.Fatal(err)
		}
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(m))); a%hugePage != 0 {
			t.Errorf("size %d: mapped at %#x, not 2 MiB aligned", size, a)
		}
		if !bytes.Equal(m, want) {
			t.Errorf("size %d: mapped bytes differ from the file", size)
		}
		if err := unmapFile(m); err != nil {
			t.Fatal(err)
		}
	}
}
