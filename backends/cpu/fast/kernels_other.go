//go:build !amd64

package fast

import "runtime"

func detect() Level { return Portable }

// unsupported says why only the portable level runs here.
func unsupported(Level) string {
	return "GOARCH " + runtime.GOARCH + " has only the portable kernels"
}

var (
	avx512Set = portable
	avx2Set   = portable
)
