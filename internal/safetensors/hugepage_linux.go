package safetensors

import "golang.org/x/sys/unix"

// adviseHugePages asks the kernel to map m with 2 MiB pages where it can
// (MADV_HUGEPAGE); errors (no THP) are ignored.
func adviseHugePages(m []byte) { _ = unix.Madvise(m, unix.MADV_HUGEPAGE) }
