package bench

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// openTiny opens the tiny checkpoint on the CPU backend (closed when the
// test ends).
func openTiny(t *testing.T) *engine.Model {
	t.Helper()
	md, err := engine.Open(dstest.BuildTiny(t), dstest.TinyDir(), "cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(md.Close)
	return md
}

// TestBenchTiny runs the benchmark on the tiny checkpoint and checks that
// the JSON report has its figures, all positive (no timing assertions).
func TestBenchTiny(t *testing.T) {
	md := openTiny(t)
	rep, err := Run(md, Options{PrefillTokens: []int{1, 8}, DecodeContext: 4, DecodeSteps: 2, DecodeWarmup: 1,
		Repeats: 1, ProbeBytes: 8 << 20, ProbePasses: 1})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"decode_tokens_per_s", "weight_bytes_per_decode_token", "probe_bytes_per_s",
		"decode_bytes_per_s", "bandwidth_fraction", "rss_bytes", "experts_per_token", "checkpoint_bytes"} {
		if v, ok := m[k].(float64); !ok || !(v > 0) {
			t.Errorf("%s = %v, want a positive number", k, m[k])
		}
	}
	pre, ok := m["prefill"].([]any)
	if !ok || len(pre) != 2 {
		t.Fatalf("prefill = %v, want 2 entries", m["prefill"])
	}
	for i, p := range pre {
		f := p.(map[string]any)
		for _, k := range []string{"tokens", "tokens_per_s", "gflops", "flops"} {
			if v, ok := f[k].(float64); !ok || !(v > 0) {
				t.Errorf("prefill[%d].%s = %v, want a positive number", i, k, f[k])
			}
		}
	}
	if pre[1].(map[string]any)["flops"].(float64) <= pre[0].(map[string]any)["flops"].(float64) {
		t.Errorf("8 tokens count no more FLOPs than 1")
	}
	// Every layer of the tiny model chooses its experts: at least k per token.
	if rep.ExpertBytesPerToken <= 0 || rep.ExpertBytesPerToken >= rep.WeightBytesPerDecodeToken {
		t.Errorf("expert bytes %v of %v", rep.ExpertBytesPerToken, rep.WeightBytesPerDecodeToken)
	}
	if !strings.Contains(rep.Text(), "of this machine's bandwidth") {
		t.Errorf("text report lacks the bandwidth line:\n%s", rep.Text())
	}
	if len(rep.DecodeOpTimes) != 0 {
		t.Errorf("op times reported without BenchOptions.OpTimes")
	}
}

// TestBenchOpTimes checks the per-op decode times: every op of the decode
// graph that runs a kernel is listed once, with the call count the graph
// implies, and the times add up to no more than the timed decode.
func TestBenchOpTimes(t *testing.T) {
	md := openTiny(t)
	const steps = 3
	rep, err := Run(md, Options{PrefillTokens: []int{6}, DecodeContext: 4, DecodeSteps: steps, Repeats: 1, ProbeBytes: -1, OpTimes: true})
	if err != nil {
		t.Fatal(err)
	}
	perStep := map[string]int{}
	for _, n := range md.Module.Graph("decode").Nodes {
		perStep[n.Op]++
	}
	var total float64
	seen := map[string]bool{}
	for _, f := range rep.DecodeOpTimes {
		if seen[f.Op] {
			t.Errorf("op %s listed twice", f.Op)
		}
		seen[f.Op] = true
		if f.CallsPerToken != float64(perStep[f.Op]) {
			t.Errorf("%s: %v calls per token, the decode graph has %d", f.Op, f.CallsPerToken, perStep[f.Op])
		}
		if f.MsPerToken < 0 {
			t.Errorf("%s: %v ms", f.Op, f.MsPerToken)
		}
		total += f.MsPerToken * steps / 1e3
	}
	if len(seen) != len(perStep) {
		t.Errorf("%d ops timed, the decode graph has %d", len(seen), len(perStep))
	}
	if total > rep.DecodeSeconds {
		t.Errorf("op times add up to %v s, more than the decode's %v s", total, rep.DecodeSeconds)
	}
	pre := rep.Prefill[0].OpTimes
	if len(pre) == 0 || pre[0].MsPerToken < pre[len(pre)-1].MsPerToken {
		t.Errorf("prefill op times %v: want some, longest first", pre)
	}
	if !strings.Contains(rep.Text(), "kernel time per decoded token by op:") {
		t.Errorf("text report lacks the op times:\n%s", rep.Text())
	}
}

// TestBenchTextHugePageNote checks the report's hint about a checkpoint
// mapped with 4 KiB pages: shown when less than half of a sizeable mapping
// is in 2 MiB pages, not otherwise.
func TestBenchTextHugePageNote(t *testing.T) {
	for _, tc := range []struct {
		file, huge int64
		want       bool
	}{{1 << 30, 0, true}, {1 << 30, 1 << 29, false}, {1 << 30, 1 << 30, false}, {1 << 20, 0, false}} {
		r := &Report{RSSFile: tc.file, FileHuge: tc.huge}
		if got := strings.Contains(r.Text(), "mapped with 4 KiB pages"); got != tc.want {
			t.Errorf("file %d, huge %d: note shown %v, want %v", tc.file, tc.huge, got, tc.want)
		}
	}
}

// With LayerTimes the decode time is broken down by layer: every layer of
// the tiny model and the part outside them, in order, within the wall time.
func TestBenchLayerTimes(t *testing.T) {
	md := openTiny(t)
	rep, err := Run(md, Options{PrefillTokens: []int{}, DecodeContext: 4, DecodeSteps: 2, Repeats: 1, ProbeBytes: -1, LayerTimes: true})
	if err != nil {
		t.Fatal(err)
	}
	layers := map[int]bool{}
	for _, n := range md.Module.Graph("decode").Weights() {
		layers[int(n.Attrs.Int("layer", -1))] = true
	}
	if len(rep.DecodeLayerTimes) != len(layers) {
		t.Fatalf("%d layer figures, want %d (every layer and -1): %+v", len(rep.DecodeLayerTimes), len(layers), rep.DecodeLayerTimes)
	}
	var share float64
	for i, l := range rep.DecodeLayerTimes {
		if l.Layer != i-1 || !(l.MsPerToken > 0) || !(l.KernelsPerTok > 0) {
			t.Errorf("figure %d: %+v", i, l)
		}
		share += l.Share
	}
	if share > 1 {
		t.Errorf("layer shares sum to %.3f of the wall time", share)
	}
	if !strings.Contains(rep.Text(), "by layer:") {
		t.Error("the text report has no layer breakdown")
	}
}

// TestBenchGEMM checks the CPU GEMM figure of a cpu run on the tiny
// checkpoint: present in the JSON report with a positive rate and the
// shape of the prefill graph's largest fp8 projection, and each prefill
// figure's gemm_fraction = its gflops / the GEMM's (no timing assertions).
func TestBenchGEMM(t *testing.T) {
	md := openTiny(t)
	rep, err := Run(md, Options{PrefillTokens: []int{1, 8}, DecodeContext: 4, DecodeSteps: 1, Repeats: 1, ProbeBytes: -1, GEMMSeconds: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		GEMM map[string]any `json:"gemm"`
		Pre  []struct {
			GFLOPS   float64  `json:"gflops"`
			Fraction *float64 `json:"gemm_fraction"`
		} `json:"prefill"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"m", "k", "n", "calls", "seconds", "gflops"} {
		if v, ok := m.GEMM[k].(float64); !ok || !(v > 0) {
			t.Errorf("gemm.%s = %v, want a positive number", k, m.GEMM[k])
		}
	}
	// the largest fp8 weight of the prefill graph, independently
	var name string
	var size int64
	for _, n := range md.Module.Graph("prefill").Nodes {
		if w := n.Args; n.Op == "matmul_fp8" && w[1].Type.Shape[0].N*w[1].Type.Shape[1].N > size {
			size, name = w[1].Type.Shape[0].N*w[1].Type.Shape[1].N, w[1].Attrs.Str("name", "")
		}
	}
	if g := rep.GEMM; size == 0 || g.Weight != name || g.WeightN != 0 || int64(g.K)*int64(g.N) != size || g.M != gemmMinRows {
		t.Errorf("GEMM %+v, want K·N = %d of %s and M = %d (8 tokens, clamped)", g, size, name, gemmMinRows)
	}
	if g := m.GEMM["gflops"].(float64); math.Abs(g-2*float64(rep.GEMM.M*rep.GEMM.K*rep.GEMM.N)/rep.GEMM.Seconds/1e9) > 1e-9*g {
		t.Errorf("gemm.gflops %v is not 2·M·K·N / seconds", g)
	}
	if len(m.Pre) != 2 {
		t.Fatalf("%d prefill figures", len(m.Pre))
	}
	for i, p := range m.Pre {
		want := p.GFLOPS / rep.GEMM.GFLOPS
		if p.Fraction == nil || !(*p.Fraction > 0) || math.Abs(*p.Fraction-want) > 1e-12*want {
			t.Errorf("prefill[%d].gemm_fraction = %v, want %v / %v = %v", i, p.Fraction, p.GFLOPS, rep.GEMM.GFLOPS, want)
		}
	}
	if txt := rep.Text(); !strings.Contains(txt, "CPU GEMM kernel alone: fast.MatmulFP8") || !strings.Contains(txt, "% of the GEMM") {
		t.Errorf("text report lacks the GEMM figures:\n%s", txt)
	}
	// skipped on request
	if rep, err = Run(md, Options{PrefillTokens: []int{2}, DecodeContext: 2, DecodeSteps: 1, Repeats: 1, ProbeBytes: -1, GEMMSeconds: -1}); err != nil {
		t.Fatal(err)
	} else if rep.GEMM != nil || rep.Prefill[0].GEMMFraction != 0 {
		t.Errorf("GEMMSeconds < 0: GEMM %+v, fraction %v", rep.GEMM, rep.Prefill[0].GEMMFraction)
	}
}
