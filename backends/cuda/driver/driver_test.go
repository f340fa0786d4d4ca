package driver

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestErrorNamesCallAndPurpose(t *testing.T) {
	e := &Error{Call: "cuMemAlloc", What: `of 1.5 GiB for "layers.3.ffn.experts"`, Code: ErrOutOfMemory,
		Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	want := `cuMemAlloc of 1.5 GiB for "layers.3.ffn.experts": CUDA_ERROR_OUT_OF_MEMORY (out of memory)`
	if e.Error() != want {
		t.Fatalf("got %q, want %q", e.Error(), want)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 512: "512 B", 1024: "1 KiB", 3 << 29: "1.5 GiB", 5 << 40: "5 TiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestProbe checks that Probe answers with one short line: nil where a
// usable GPU is present, else a reason. Without libcuda.so.1 (CI) the reason
// must be exactly "libcuda.so.1 not found".
func TestProbe(t *testing.T) {
	err := Probe()
	if err == nil {
		devs, derr := Devices()
		if derr != nil || len(devs) == 0 {
			t.Fatalf("Probe passed but Devices = %v, %v", devs, derr)
		}
		v, _ := DriverVersion()
		t.Logf("usable: %+v, driver API %d", devs[0], v)
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || msg == "" {
		t.Fatalf("reason %q is not one line", msg)
	}
	if !hasLib() {
		if msg != LibName+" not found" {
			t.Fatalf("without the library: reason %q, want %q", msg, LibName+" not found")
		}
	}
	t.Logf("unavailable: %s", msg)
}

// hasLib reports whether any usual library folder holds libcuda.so.1.
func hasLib() bool {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"} {
		if _, err := os.Stat(d + "/" + LibName); err == nil {
			return true
		}
	}
	return false
}

// gpu opens GPU 0 or skips the test with the reason.
func gpu(t *testing.T) *Context {
	t.Helper()
	if err := Probe(); err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func TestRoundTripOnGPU(t *testing.T) {
	c := gpu(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 3<<20 + 5
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + i>>9)
	}
	a, err := c.Alloc(n, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(a, "a")
	b, err := c.Alloc(n, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(b, "b")
	if err := s.Memset(b, 0xAB, n, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Upload(a, src, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(b, a, n-5, "b"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := s.Download(got, b, "b"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:n-5], src[:n-5]) || !bytes.Equal(got[n-5:], bytes.Repeat([]byte{0xAB}, 5)) {
		t.Fatal("device round trip changed the data")
	}
}

// TestOutOfMemoryOnGPU asks for far more than any GPU holds and checks the
// error names the call, the size and the buffer; and that the free memory
// is back where it was once a real allocation is freed.
func TestOutOfMemoryOnGPU(t *testing.T) {
	c := gpu(t)
	_, err := c.Alloc(1<<50, "layers.3.ffn.experts")
	want := `cuMemAlloc of 1 PiB for "layers.3.ffn.experts": CUDA_ERROR_OUT_OF_MEMORY (out of memory)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	free0, total, err := c.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Alloc(1<<30, "probe")
	if err != nil {
		t.Fatal(err)
	}
	free1, _, _ := c.MemInfo()
	if err := c.Free(p, "probe"); err != nil {
		t.Fatal(err)
	}
	free2, _, _ := c.MemInfo()
	t.Logf("free %s of %s; with 1 GiB held %s; after free %s", Size(free0), Size(total), Size(free1), Size(free2))
	if free0-free1 < 1<<30 || free2 < free0 {
		t.Fatalf("free memory did not follow the 1 GiB allocation: %d, %d, %d", free0, free1, free2)
	}
}

// TestHostBufferOnGPU: host memory mapped for the GPU is read and written
// through its device address by the GPU's copies, and freed.
func TestHostBufferOnGPU(t *testing.T) {
	c := gpu(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 1<<20 + 3
	h, err := c.NewHostBuffer(n, "table")
	if err != nil {
		t.Fatal(err)
	}
	for i := range h.Bytes {
		h.Bytes[i] = byte(i*13 + i>>11)
	}
	d, err := c.Alloc(n, "d")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(d, "d")
	if err := s.Copy(d, h.Dev, n, "d"); err != nil { // the GPU reads host memory
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := s.Download(got, d, "d"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, h.Bytes) {
		t.Fatal("the GPU read other bytes than the host buffer holds")
	}
	if err := s.Memset(h.Dev+7, 0x5A, 9, "table"); err != nil { // and writes it
		t.Fatal(err)
	}
	if err := s.Sync("memset"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Bytes[7:16], bytes.Repeat([]byte{0x5A}, 9)) || h.Bytes[6] != byte(6*13) {
		t.Fatal("the GPU's write through the mapping is not what the host sees")
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
}

// The launch configuration cuLaunchKernelEx reads must have cuda.h's layout
// (CUlaunchConfig 56 bytes, CUlaunchAttribute 72, on 64-bit hosts), and
// CUgraphEdgeData 8.
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	got := []uintptr{unsafe.Sizeof(c), unsafe.Offsetof(c.stream), unsafe.Offsetof(c.attrs), unsafe.Offsetof(c.numAttrs),
		unsafe.Sizeof(a), unsafe.Offsetof(a.val), unsafe.Sizeof(graphEdge{})}
	want := []uintptr{56, 32, 40, 48, 72, 8, 8}
	if !slices.Equal(got, want) {
		t.Fatalf("sizes and offsets %v, want cuda.h's %v", got, want)
	}
}
