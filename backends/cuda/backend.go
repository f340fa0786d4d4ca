package cuda

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

// Backend is the registered "cuda" backend: every op of the released
// graphs on GPU 0.
type Backend struct{}

func init() { backends.Register(Backend{}) }

// Name implements backends.Backend.
func (Backend) Name() string { return "cuda" }

// Available implements backends.Backend: driver.Probe's reason ("libcuda.so.1
// not found", "no CUDA device", "driver too old: ...").
func (Backend) Available() error { return driver.Probe() }

// Capabilities implements backends.Backend: the ops of the launcher table
// in every dtype but f16 (no kernel rounds to f16), refined per node by
// Supports. What it does not run goes to the cpu backend when that is
// registered (a plan from a newer compiler); the released graphs need none.
func (Backend) Capabilities() backends.Capabilities {
	dts := []ir.DType{ir.F32, ir.BF16, ir.F8E4M3, ir.FP4E2M1, ir.E8M0, ir.I8, ir.U8, ir.I32, ir.I64, ir.Bool}
	c := backends.Capabilities{Ops: map[string][]ir.DType{}, Accept: Supports}
	for op := range ops {
		c.Ops[op] = dts
	}
	if _, err := backends.Get("cpu"); err == nil {
		c.Fallback = "cpu"
	}
	return c
}

// Open implements backends.Backend: a context on GPU 0 with the embedded
// kernels (DS4_CUDA_FATBIN=path loads that image instead, to try a fatbin
// built on the device machine before it is checked in).
func (Backend) Open() (backends.Device, error) {
	var image []byte
	if p := os.Getenv("DS4_CUDA_FATBIN"); p != "" {
		var err error
		if image, err = os.ReadFile(p); err != nil {
			return nil, err
		}
	}
	held.Do(func() { held.ctx, held.err = driver.Open(0) })
	if held.err != nil {
		return nil, held.err
	}
	return OpenGPU(image)
}

// held retains GPU 0's primary context for the life of the process, so
// that closing the last device does not tear the context down and the next
// Open does not build it again (the conformance suite opens a device per
// case); what a device allocated is freed by its Close all the same.
var held struct {
	sync.Once
	ctx *driver.Context
	err error
}

var _ backends.Device = (*GPU)(nil)

// Describe implements backends.Device.
func (g *GPU) Describe() string {
	devs, err := driver.Devices()
	if err != nil || len(devs) == 0 {
		return "GPU 0"
	}
	d := devs[0]
	v, _ := driver.DriverVersion()
	s := fmt.Sprintf("%s (sm_%d, %d SMs, %s), CUDA %d.%d", d.Name, d.CC, d.SMs, driver.Size(d.TotalMem), v/1000, v%1000/10)
	if g.st.ProgrammaticLaunch() {
		s += ", programmatic launches"
	}
	return s
}

// Memory implements backends.Device.
func (g *GPU) Memory() (free, total int64, err error) {
	f, t, err := g.ctx.MemInfo()
	return int64(f), int64(t), err
}

// fits refuses an allocation of need bytes for what before it is made when
// the GPU has less free: one line naming both.
func (g *GPU) fits(need int64, what string) error {
	free, _, err := g.ctx.MemInfo()
	if err != nil {
		return err
	}
	if need > int64(free) {
		return fmt.Errorf("GPU 0: %s needs %s of device memory, %s is free", what, driver.Size(uint64(need)), driver.Size(free))
	}
	return nil
}

// BindWeight implements backends.Device. A 2-D bf16 matrix stays bf16 and
// the fp8 wo_a stays fp8 (the products read them as stored); fp8 and fp4
// products and the Engram tables keep codes and scales; other float
// weights become fp32 values. A weight a non-product op reads as stored is
// widened at its first such use (only those weights keep their host bytes,
// mapped from a checkpoint while the model is open).
func (g *GPU) BindWeight(w *backends.HostWeight) (backends.Buffer, error) {
	use := "values"
	if len(w.Shape) == 2 && (w.Format == "bf16" || w.Format == "fp8") {
		use = "plain"
	}
	hw, err := layoutOf(w, use)
	if err != nil {
		return nil, err
	}
	if engramTable(w) {
		mode := os.Getenv(EngramEnv)
		if mode == "host" || (mode != "gpu" && g.fits(hw.deviceBytes(), "") != nil) {
			return g.bindHostTable(w, hw)
		}
	}
	if err := g.fits(hw.deviceBytes(), fmt.Sprintf("weight %q", w.Name)); err != nil {
		return nil, err
	}
	v, err := g.uploadWeight(w, hw)
	if err != nil {
		return nil, err
	}
	v.W.codes, v.W.scales = len(hw.data), len(hw.scale)
	if hw.kind == LayoutBF16 || hw.kind == LayoutStoredFP8 {
		// Only these layouts are widened later (values); keeping every
		// weight's host bytes would hold a generated model (synth.Source)
		// in host memory twice over.
		v.W.src = w
	}
	return v, nil
}

// Alloc implements backends.Device: a zeroed buffer.
func (g *GPU) Alloc(dt ir.DType, shape []int) (backends.Buffer, error) {
	v := &Value{DType: dt, Shape: append([]int(nil), shape...)}
	if err := g.fits(v.Bytes(), fmt.Sprintf("a %s%v buffer", dt, shape)); err != nil {
		return nil, err
	}
	var err error
	if v.Ptr, err = g.alloc(v.Bytes(), fmt.Sprintf("%s%v", dt, shape)); err != nil {
		return nil, err
	}
	return v, g.st.Memset(v.Ptr, 0, int(v.Bytes()), fmt.Sprintf("%s%v", dt, shape))
}

// Upload implements backends.Device. Small int64 values (start_pos, the
// tokens of a short call) keep a host copy for launchers that take them as
// arguments.
func (g *GPU) Upload(t *backends.Tensor) (backends.Buffer, error) {
	v := &Value{DType: t.DType, Shape: append([]int(nil), t.Shape...)}
	var src []byte
	switch {
	case t.DType == ir.I64:
		src = asBytes(t.I64)
		if len(t.I64) <= 1<<16 {
			v.Host = append([]int64(nil), t.I64...)
		}
	case t.DType == ir.I32:
		src = asBytes(t.I32)
	case elemBytes(t.DType) == 1:
		src = t.U8
	case t.DType.IsFloat():
		src = asBytes(t.F32)
	default:
		return nil, fmt.Errorf("cuda: cannot upload a %s tensor", t.DType)
	}
	if int64(len(src)) != v.Bytes() {
		return nil, fmt.Errorf("cuda: uploading %s%v: %d bytes of values, want %d", t.DType, t.Shape, len(src), v.Bytes())
	}
	var err error
	if v.Ptr, err = g.alloc(v.Bytes(), fmt.Sprintf("upload of %s%v", t.DType, t.Shape)); err != nil {
		return nil, err
	}
	return v, g.st.Upload(v.Ptr, src, fmt.Sprintf("%s%v", t.DType, t.Shape))
}

// Download implements backends.Device (it waits for the queued work).
func (g *GPU) Download(b backends.Buffer) (*backends.Tensor, error) {
	v, ok := b.(*Value)
	if !ok {
		return nil, fmt.Errorf("cuda: downloading a %T, not a GPU buffer", b)
	}
	t := &backends.Tensor{DType: v.DType, Shape: append([]int(nil), v.Shape...)}
	name := fmt.Sprintf("%s%v", v.DType, v.Shape)
	if v.W != nil {
		return g.downloadWeight(v, t, name)
	}
	var err error
	switch {
	case v.DType == ir.I64:
		t.I64 = make([]int64, v.Numel())
		err = Download(g.st, t.I64, v.Ptr, name)
	case v.DType == ir.I32:
		t.I32 = make([]int32, v.Numel())
		err = Download(g.st, t.I32, v.Ptr, name)
	case elemBytes(v.DType) == 1:
		t.U8 = make([]byte, v.Numel())
		err = Download(g.st, t.U8, v.Ptr, name)
	default:
		t.F32 = make([]float32, v.Numel())
		err = Download(g.st, t.F32, v.Ptr, name)
	}
	return t, err
}

// downloadWeight reads a weight back in the host layouts
// (backends.HostWeightTensor's): fp32 values for float matrices, codes and
// scales for fp8/fp4, one part per expert.
func (g *GPU) downloadWeight(v *Value, t *backends.Tensor, name string) (*backends.Tensor, error) {
	bytes := func(p driver.Ptr, n int) ([]byte, error) {
		b := make([]byte, n)
		return b, g.st.Download(b, p, name)
	}
	var err error
	switch v.W.Kind {
	case LayoutF32:
		t.F32 = make([]float32, v.Numel())
		err = Download(g.st, t.F32, v.Ptr, name)
	case LayoutBF16:
		var raw []byte
		if raw, err = bytes(v.Ptr, 2*v.Numel()); err == nil {
			t.F32 = widenBF16(raw)
		}
	case LayoutI64:
		t.I64 = make([]int64, v.Numel())
		err = Download(g.st, t.I64, v.Ptr, name)
	case LayoutQuant, LayoutStoredFP8:
		if t.U8, err = bytes(v.Ptr, v.W.codes); err == nil {
			t.Scale, err = bytes(v.W.Scale, v.W.scales)
		}
	case LayoutRouted:
		r := v.W.Routed
		for e := range r.Experts {
			p := &backends.Tensor{DType: v.DType, Shape: append([]int(nil), v.Shape[1:]...)}
			if p.U8, err = bytes(r.W+driver.Ptr(e*r.WStride), r.WStride); err != nil {
				break
			}
			if p.Scale, err = bytes(r.Scale+driver.Ptr(e*r.ScaleStride), r.ScaleStride); err != nil {
				break
			}
			t.Parts = append(t.Parts, p)
		}
	}
	return t, err
}

// EngramEnv names the environment variable that places the Engram tables:
// "host" keeps them in page-locked host memory the lookup kernel reads
// over PCIe (only the rows looked up cross), "gpu" puts them in device
// memory; unset, a table goes to the GPU when it fits in the free memory
// and stays on the host otherwise.
const EngramEnv = "DS4_CUDA_ENGRAM"

// hostTables counts the Engram tables bound in host memory (for tests).
var hostTables atomic.Int64

// engramTable reports whether w is an Engram table (the fp8 codes with a
// scale per row and 32 columns that engram_lookup reads).
func engramTable(w *backends.HostWeight) bool {
	return w.Format == "fp8row" && w.DType == ir.F8E4M3 && len(w.Parts) == 0
}

// bindHostTable puts an Engram table's codes and scales in page-locked host
// memory mapped for the GPU: engram_lookup reads the rows the hash chose
// through the device address, with no copy of the table and no host round
// trip.
func (g *GPU) bindHostTable(w *backends.HostWeight, hw *hostWeight) (*Value, error) {
	off := (len(hw.data) + 255) &^ 255
	hb, err := g.ctx.NewHostBuffer(off+len(hw.scale), w.Name)
	if err != nil {
		return nil, err
	}
	copy(hb.Bytes, hw.data)
	copy(hb.Bytes[off:], hw.scale)
	g.mu.Lock()
	g.hostBufs[hb] = true
	g.mu.Unlock()
	hostTables.Add(1)
	return &Value{DType: w.DType, Shape: append([]int(nil), w.Shape...), Ptr: hb.Dev,
		W: &Layout{Kind: LayoutQuant, Scale: hb.Dev + driver.Ptr(off), codes: len(hw.data), scales: len(hw.scale), host: hb}}, nil
}

// Free implements backends.Device.
func (g *GPU) Free(b backends.Buffer) error {
	v, ok := b.(*Value)
	if !ok {
		return fmt.Errorf("cuda: freeing a %T, not a GPU buffer", b)
	}
	if v.W != nil {
		return g.freeWeight(v)
	}
	err := g.free(v.Ptr)
	v.Ptr = 0
	return err
}

func (g *GPU) freeWeight(v *Value) error {
	if hb := v.W.host; hb != nil {
		g.mu.Lock()
		delete(g.hostBufs, hb)
		g.mu.Unlock()
		v.Ptr, v.W.Scale, v.W.host = 0, 0, nil
		return hb.Free()
	}
	var err error
	for _, p := range []driver.Ptr{v.Ptr, v.W.Scale, v.W.widened} {
		if e := g.free(p); e != nil && err == nil {
			err = e
		}
	}
	if v.W.Routed != nil {
		if e := g.free(v.W.Routed.Scale); e != nil && err == nil {
			err = e
		}
	}
	v.Ptr, v.W.Scale, v.W.widened = 0, 0, 0
	return err
}

// NewArena implements backends.Device: the slots are allocated now, after
// their total is checked against the free memory.
func (g *GPU) NewArena(sizes []backends.SlotSize) (backends.Arena, error) {
	return g.newArena(sizes)
}

// Prepare implements backends.Device.
func (g *GPU) Prepare(seg *backends.Segment) (backends.Program, error) {
	p, err := g.prepare(seg)
	if err != nil {
		return nil, err
	}
	g.programs = append(g.programs, p)
	return p, nil
}

// Sync implements backends.Device: it waits for the stream and checks the
// error flags of the programs launched since the last Sync.
func (g *GPU) Sync() error {
	if err := g.st.Sync("the queued launches"); err != nil {
		return err
	}
	if err := g.timeline.resolve(); err != nil {
		return err
	}
	pending := g.pending
	g.pending = nil
	for _, p := range pending {
		if err := p.checkFlags(); err != nil {
			return err
		}
	}
	return nil
}

// Type implements backends.Buffer.
func (v *Value) Type() (ir.DType, []int) { return v.DType, v.Shape }

// Bytes implements backends.Buffer (for a weight: its layout's bytes).
func (v *Value) Bytes() int64 {
	if v.W != nil {
		return v.W.Bytes
	}
	return int64(v.Numel()) * elemBytes(v.DType)
}
