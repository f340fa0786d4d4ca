package synth

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropPageCache drops f's pages from the page cache (they must be on disk:
// f synced); errors are ignored.
func dropPageCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
