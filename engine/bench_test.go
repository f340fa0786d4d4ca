package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchTiny runs the benchmark on the tiny checkpoint and checks that
// the JSON report has its figures, all positive (no timing assertions).
func TestBenchTiny(t *testing.T) {
	md := openTiny(t)
	rep, err := md.Bench(BenchOptions{PrefillTokens: []int{1, 8}, DecodeContext: 4, DecodeSteps: 2, DecodeWarmup: 1,
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
}

// TestLoadProgress checks the progress line goes to ProgressOutput and ends
// with a newline once something was shown.
func TestLoadProgress(t *testing.T) {
	var buf bytes.Buffer
	ProgressOutput = &buf
	defer func() { ProgressOutput = nil }()
	md := openTiny(t)
	p := newLoadProgress(md.w, md.pg, md.dg)
	if p.all == 0 || p.total <= 0 || p.mapped <= 0 {
		t.Fatalf("progress counts %d tensors, %d bytes, %d mapped", p.all, p.total, p.mapped)
	}
	for _, n := range md.pg.Nodes {
		if n.Op == "weight" {
			p.bound(n)
		}
	}
	p.show(false)
	p.done()
	out := buf.String()
	if !strings.Contains(out, "binding weights:") || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress output %q", out)
	}
}
