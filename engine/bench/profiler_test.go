package bench

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// profBackend is cpu-ref whose device is a backends.Profiler: it counts
// one kernel per node launched, one host launch per program launch, and
// probes a fixed bandwidth.
type profBackend struct{ backends.Backend }

type profDevice struct {
	backends.Device
	kernels, launches atomic.Int64
}

type profProgram struct {
	backends.Program
	d     *profDevice
	nodes int64
}

func (b profBackend) Name() string { return "bench-profiler-test" }

func (b profBackend) Capabilities() backends.Capabilities {
	c := b.Backend.Capabilities()
	c.Fallback = ""
	return c
}

func (b profBackend) Open() (backends.Device, error) {
	d, err := b.Backend.Open()
	if err != nil {
		return nil, err
	}
	return &profDevice{Device: d}, nil
}

func (d *profDevice) Prepare(seg *backends.Segment) (backends.Program, error) {
	p, err := d.Device.Prepare(seg)
	if err != nil {
		return nil, err
	}
	return &profProgram{Program: p, d: d, nodes: int64(len(seg.Nodes))}, nil
}

func (p *profProgram) Launch(env *backends.Env) error {
	p.d.kernels.Add(p.nodes)
	p.d.launches.Add(1)
	return p.Program.Launch(env)
}

func (d *profDevice) ProbeBandwidth(bytes int64) (float64, error) { return 4e12, nil }

func (d *profDevice) Counters() backends.Counters {
	return backends.Counters{Kernels: d.kernels.Load(), Launches: d.launches.Load()}
}

func init() {
	ref, err := backends.Get("cpu-ref")
	if err != nil {
		panic(err)
	}
	backends.Register(profBackend{ref})
}

// On a device that is a backends.Profiler the report has the device's
// bandwidth probe, decode's share of it and of the floor, and the kernels
// per decode step and per prefill token.
func TestBenchProfilerFields(t *testing.T) {
	md, err := engine.Open(dstest.BuildTiny(t), dstest.TinyDir(), "bench-profiler-test")
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	rep, err := Run(md, Options{PrefillTokens: []int{4}, DecodeContext: 4, DecodeSteps: 2, DecodeWarmup: 1,
		Repeats: 1, ProbeBytes: 1 << 20, ProbePasses: 1, FloorBytesPerS: 4.3e12})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(rep)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if v, _ := m["hbm_bandwidth"].(float64); v != 4000 {
		t.Errorf("hbm_bandwidth = %v, want 4000 (GB/s)", m["hbm_bandwidth"])
	}
	dev, _ := m["device"].(map[string]any)
	for _, k := range []string{"probe_gb_per_s", "probe_fraction", "floor_gb_per_s", "floor_fraction", "floor_tokens_per_s",
		"kernels_per_decode_step", "launches_per_decode_step"} {
		if v, ok := dev[k].(float64); !ok || !(v > 0) {
			t.Errorf("device.%s = %v, want a positive number", k, dev[k])
		}
	}
	if dev["floor_gb_per_s"] != 4300.0 {
		t.Errorf("floor_gb_per_s = %v, want the 4300 asked", dev["floor_gb_per_s"])
	}
	if k := rep.Device.KernelsPerStep; k <= 0 || k > float64(len(md.Module.Graph("decode").Nodes)) {
		t.Errorf("kernels per decode step %v, want in (0, %d]", k, len(md.Module.Graph("decode").Nodes))
	}
	if rep.Prefill[0].KernelsPerToken <= 0 {
		t.Errorf("prefill kernels per token %v", rep.Prefill[0].KernelsPerToken)
	}
	txt := rep.Text()
	for _, want := range []string{"device bandwidth probe 4000.0 GB/s", "floor at 4300 GB/s", "kernels, "} {
		if !strings.Contains(txt, want) {
			t.Errorf("text report lacks %q:\n%s", want, txt)
		}
	}
	// A device that is not a profiler has none of these fields.
	plain, err := Run(openTiny(t), Options{PrefillTokens: []int{1}, DecodeContext: 2, DecodeSteps: 1, Repeats: 1, ProbeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(plain)
	if strings.Contains(string(raw), "hbm_bandwidth") || strings.Contains(string(raw), `"device"`) || strings.Contains(string(raw), "kernels_per_token") {
		t.Errorf("report of a plain device has device fields: %s", raw)
	}
}
