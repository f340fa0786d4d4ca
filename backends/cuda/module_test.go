package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

// TestKernelsWaitFirst checks the sources for what programmatic launches
// rely on (common.cuh's pdl_entry): every extern "C" kernel's body opens
// with pdl_entry() (or with pdl_trigger() in a file that calls pdl_wait()
// itself), so no kernel touches what earlier kernels write before they have
// finished. Runs in CI.
func TestKernelsWaitFirst(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("kernels", "*.cu*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no kernel sources (%v)", err)
	}
	kernels := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		for off := 0; ; {
			i := strings.Index(src[off:], `extern "C" __global__`)
			if i < 0 {
				break
			}
			i += off
			open := strings.IndexByte(src[i:], '{')
			if open < 0 {
				t.Fatalf("%s: a kernel without a body at byte %d", f, i)
			}
			body := strings.TrimLeft(src[i+open+1:], " \t\\\n")
			switch {
			case strings.HasPrefix(body, "pdl_entry();"):
			case strings.HasPrefix(body, "pdl_trigger();") && strings.Contains(src, "pdl_wait();"):
				// waits after a prologue on weights (gemv_mma.cuh's plain products)
			default:
				t.Errorf("%s: kernel %q does not open with pdl_entry()", f, firstLine(src[i:]))
			}
			kernels++
			off = i + open + 1
		}
	}
	if kernels < 50 {
		t.Fatalf("found only %d kernels in %v", kernels, files)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
