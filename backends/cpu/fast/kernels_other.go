//go:build !amd64

package fast

func detect() Level { return Portable }

var (
	avx512Set = portable
	avx2Set   = portable
)
