package cuda

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

// TestRegisteredAndAvailability: "cuda" is registered; where no GPU is
// usable, Available gives driver.Probe's reason (what `exec -list-backends`
// prints and `-backend cuda` refuses with).
func TestRegisteredAndAvailability(t *testing.T) {
	b, err := backends.Get("cuda")
	if err != nil {
		t.Fatal(err)
	}
	probe := driver.Probe()
	if got := b.Available(); (got == nil) != (probe == nil) || (got != nil && got.Error() != probe.Error()) {
		t.Fatalf("Available() = %v, driver.Probe() = %v", got, probe)
	}
	if probe != nil && !strings.Contains(probe.Error(), "libcuda") && !strings.Contains(probe.Error(), "device") && !strings.Contains(probe.Error(), "driver") {
		t.Errorf("the reason %q names neither the library, a device nor the driver", probe)
	}
	caps := b.Capabilities()
	for _, op := range []string{"matmul_fp8", "expert_matmul", "sparse_attn", "engram_lookup", "hc_split_sinkhorn", "index_topk", "compressor_pool"} {
		if _, ok := caps.Ops[op]; !ok {
			t.Errorf("capabilities lack %s", op)
		}
	}
}

// TestEveryGraphOpHasALauncher: every op of the IR table runs on the GPU.
func TestEveryGraphOpHasALauncher(t *testing.T) {
	for op := range ir.Ops {
		if _, ok := ops[op]; !ok {
			t.Errorf("op %s has no GPU launcher", op)
		}
	}
}

// lifecycleGraph is x f32[B,S,k] · w bf16[n,k]ᵀ → f32 (the plain product).
func lifecycleGraph(n, k int) (*ir.Graph, *backends.HostWeight) {
	g := ir.NewGraph("lifecycle")
	x := g.Source("input", ir.T(ir.F32, "B", "S", k), ir.Attrs{"name": "x"})
	w := &backends.HostWeight{Name: "w", DType: ir.F32, Shape: []int{n, k}, Format: "bf16", Stored: "BF16", Data: make([]byte, 2*n*k)}
	for i := range n * k {
		binary.LittleEndian.PutUint16(w.Data[2*i:], 0x3f80) // 1.0
	}
	w.Node = g.Source("weight", ir.T(ir.F32, n, k), ir.Attrs{"name": "w", "format": "bf16"})
	g.SetOutput("y", g.Add("matmul", ir.Attrs{"buf": int64(0)}, x, w.Node))
	return g, w
}

// TestOpenCloseFreesMemoryOnGPU opens a device, binds a 32 MiB weight,
// makes an arena, runs a call and closes it, many times: the free memory
// must come back each time (nothing leaks per model or session).
func TestOpenCloseFreesMemoryOnGPU(t *testing.T) {
	const n, k, cycles = 4096, 4096, 12
	g, w := lifecycleGraph(n, k)
	pl, err := backends.Schedule(g, "cuda")
	if err != nil {
		t.Fatal(err)
	}
	gpu(t) // skips without a GPU; holds the context the measurements share
	x := &backends.Tensor{DType: ir.F32, Shape: []int{1, 2, k}, F32: make([]float32, 2*k)}
	for i := range x.F32 {
		x.F32[i] = float32(i%7) - 3
	}
	var base uint64
	for c := range cycles {
		d, err := Backend{}.Open()
		if err != nil {
			t.Fatal(err)
		}
		if c == 0 {
			if err := d.Close(); err != nil { // the first Open loads what stays (the context's own)
				t.Fatal(err)
			}
			if base, _, err = gpu(t).c.MemInfo(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wb, err := d.BindWeight(w)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := d.NewArena([]backends.SlotSize{{F32: 2 * n}})
		if err != nil {
			t.Fatal(err)
		}
		run, err := backends.NewRunner(pl, map[string]backends.Device{"cuda": d})
		if err != nil {
			t.Fatal(err)
		}
		out, err := run.Run(&backends.Call{B: 1, S: 2, M: 2, Inputs: map[string]*backends.Tensor{"x": x},
			Weight: func(string, *ir.Node) (backends.Buffer, error) { return wb, nil }, Arenas: map[string]backends.Arena{"cuda": ar}})
		if err != nil {
			t.Fatal(err)
		}
		y, err := d.Download(out["y"])
		if err != nil {
			t.Fatal(err)
		}
		var want float32 // Σ_k x[0,k]·1
		for i := range k {
			want += x.F32[i]
		}
		if y.F32[0] != want || y.F32[n-1] != want {
			t.Fatalf("cycle %d: y[0] = %v, y[n-1] = %v, want %v", c, y.F32[0], y.F32[n-1], want)
		}
		if used := d.(*GPU).Used(); used < int64(2*n*k) {
			t.Fatalf("cycle %d: %d bytes allocated, the weight alone is %d", c, used, 2*n*k)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		free, _, err := gpu(t).c.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		// the driver gives freed memory back at once; 2 MiB covers its
		// page granularity (measured: see NOTES.md)
		if lost := int64(base) - int64(free); lost > 2<<20 {
			t.Fatalf("cycle %d: %s less free than before the first model (%s free)", c, driver.Size(uint64(lost)), driver.Size(free))
		}
		t.Logf("cycle %d: free %s (base %s)", c, driver.Size(free), driver.Size(base))
	}
}

// TestRefusesWhatDoesNotFitOnGPU: an arena larger than the free memory is
// refused before anything is allocated, in one line naming both.
func TestRefusesWhatDoesNotFitOnGPU(t *testing.T) {
	gpu(t)
	d, err := Backend{}.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := d.(*GPU).Used()
	_, err = d.NewArena([]backends.SlotSize{{F32: math.MaxInt32}, {F32: math.MaxInt32}, {I64: math.MaxInt32 * 40}})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "needs") || !strings.Contains(err.Error(), "free") {
		t.Fatalf("got %v, want one line naming the need and the free memory", err)
	}
	if d.(*GPU).Used() != before {
		t.Fatalf("%d bytes allocated by a refused arena", d.(*GPU).Used()-before)
	}
	t.Log(err)
}
