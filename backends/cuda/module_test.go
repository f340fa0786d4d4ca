package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestEmbeddedFatbinMatchesSources fails when a kernel source or the build
// script changed after the fatbin was built (rebuild with kernels/build.sh
// on the device machine and check in ds4.fatbin and ds4.fatbin.sha256), or
// when the embedded fatbin is not the one the build recorded. Runs in CI.
func TestEmbeddedFatbinMatchesSources(t *testing.T) {
	sums, err := RecordedSums()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFatbin(); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, pat := range []string{"build.sh", "*.cu", "*.cuh"} {
		m, err := filepath.Glob(filepath.Join("kernels", pat))
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, m...)
	}
	sort.Strings(sources)
	for _, p := range sources {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		name := filepath.Base(p)
		if got := hex.EncodeToString(h[:]); sums[name] != got {
			t.Errorf("%s changed since the fatbin was built (SHA-256 %s, recorded %q): run kernels/build.sh on the device machine", p, got, sums[name])
		}
		delete(sums, name)
	}
	delete(sums, FatbinName)
	for name := range sums {
		t.Errorf("the fatbin was built from kernels/%s, which is gone: rebuild it", name)
	}
}
