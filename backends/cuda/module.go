package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// The kernels, built by kernels/build.sh on a machine with nvcc and checked
// in; ds4.fatbin.sha256 records the SHA-256 of every source and of the
// fatbin (TestEmbeddedFatbinMatchesSources fails when they drift apart).
var (
	//go:embed kernels/ds4.fatbin
	fatbin []byte
	//go:embed kernels/ds4.fatbin.sha256
	fatbinSums string
)

// FatbinName is the embedded image's file name, as ds4.fatbin.sha256 lists it.
const FatbinName = "ds4.fatbin"

// Fatbin returns the embedded kernel image (sm_90a code and compute_90 PTX).
func Fatbin() []byte { return fatbin }

// RecordedSums returns the file → SHA-256 (hex) table recorded at build time.
func RecordedSums() (map[string]string, error) {
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(fatbinSums), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || len(f[0]) != 64 {
			return nil, fmt.Errorf("kernels/ds4.fatbin.sha256: bad line %q", line)
		}
		sums[strings.TrimPrefix(f[1], "*")] = f[0]
	}
	return sums, nil
}

// CheckFatbin verifies that the embedded fatbin is the one whose hash the
// build recorded.
func CheckFatbin() error {
	sums, err := RecordedSums()
	if err != nil {
		return err
	}
	h := sha256.Sum256(fatbin)
	if got := hex.EncodeToString(h[:]); sums[FatbinName] != got {
		return fmt.Errorf("embedded %s has SHA-256 %s, the build recorded %q", FatbinName, got, sums[FatbinName])
	}
	return nil
}

// asBytes views a slice of plain values as its bytes (for uploads and
// downloads).
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// Upload copies host values to a device buffer on s.
func Upload[T any](s *driver.Stream, dst driver.Ptr, src []T, what string) error {
	return s.Upload(dst, asBytes(src), what)
}

// Download copies a device buffer into host values (after s's earlier work).
func Download[T any](s *driver.Stream, dst []T, src driver.Ptr, what string) error {
	return s.Download(asBytes(dst), src, what)
}
