package cuda

// The kernel emulations of kernels/shim (each *_emu.cpp runs kernels of
// the .cuh files on the CPU through shim/emu.h against a reference written
// from cpu-ref's definitions, and exits non-zero on a difference): built
// with the host's g++ and run, so the kernels' logic is checked on every
// machine, GPU or not (in their quick form: run a file by hand for all its
// cases). They skip where there is no g++.

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestKernelEmulations(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++ to build the kernel emulations")
	}
	srcs, err := filepath.Glob(filepath.Join("kernels", "shim", "*_emu.cpp"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no kernel emulations in kernels/shim (%v)", err)
	}
	for _, src := range srcs {
		name := strings.TrimSuffix(filepath.Base(src), ".cpp")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(t.TempDir(), name)
			// the flags of the build lines at the top of each file (and of
			// kernels/build.sh's -fmad=false: a*b+c stays two roundings)
			build := exec.Command(gxx, "-O1", "-std=c++20", "-ffp-contract=off", "-pthread", src, "-o", bin)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("g++ %s: %v\n%s", src, err, out)
			}
			// quick: the emulations that take minutes run a subset (the
			// others ignore the argument)
			out, err := exec.Command(bin, "quick").CombinedOutput()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("%s: %d lines, last: %s", name, len(lines), lines[len(lines)-1])
			if err != nil {
				t.Fatalf("%s failed (%v):\n%s", name, err, out)
			}
		})
	}
}
