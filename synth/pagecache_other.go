//go:build !linux

package synth

import "os"

// dropPageCache is a no-op where posix_fadvise is not available.
func dropPageCache(*os.File) {}
