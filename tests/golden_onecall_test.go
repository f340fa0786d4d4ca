package tests

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/fast"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/safetensors"
)

// forcedName is a probe the tracer forces from a teacher file: block input
// streams, Engram outputs and pre mixes (models/deepseekv4/build.go).
var forcedName = regexp.MustCompile(`^L\d+\.(stream_out|engram_out|pre_in)$`)

// goldOneCallForced runs the one-call prefill of the free run's tokens
// (ids: prompt + fed decode tokens) with every forced probe set to the free
// run's own value (the prompt positions from its prefill, position S+i from
// its decode step i), and returns that trace: block-local, each block of
// the one-call prefill sees the inputs the same block saw in the decode.
func goldOneCallForced(t *testing.T, backend string, fr *goldFreeRun, ids [][]int64) map[string]*goldTensor {
	t.Helper()
	N := len(fr.decode)
	var ts []safetensors.WriteTensor
	for name, x := range fr.trace {
		base, ok := strings.CutPrefix(name, "prefill.")
		if !ok || !forcedName.MatchString(base) {
			continue
		}
		B, S, rest := x.shape[0], x.shape[1], 1
		for _, d := range x.shape[2:] {
			rest *= d
		}
		out := make([]float32, 0, B*(S+N)*rest)
		for b := 0; b < B; b++ {
			out = append(out, goldF32(x.f[b*S*rest:(b+1)*S*rest])...)
			for i := 0; i < N; i++ {
				d := fr.trace[fmt.Sprintf("decode%02d.%s", i, base)]
				if d == nil || len(d.f) != B*rest {
					t.Fatalf("free run: decode%02d.%s missing or mis-shaped", i, base)
				}
				out = append(out, goldF32(d.f[b*rest:(b+1)*rest])...)
			}
		}
		shape := append([]int{B, S + N}, x.shape[2:]...)
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: "F32", Shape: shape, Data: safetensors.F32Bytes(out)})
	}
	if len(ts) == 0 {
		t.Fatal("free run traced no forced probe")
	}
	dir := t.TempDir()
	teacher := filepath.Join(dir, "teacher.safetensors")
	if err := safetensors.WriteFile(teacher, ts, nil); err != nil {
		t.Fatal(err)
	}
	tf, err := safetensors.Open(teacher)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	model, err := engine.Open(buildTiny(t), tinyDir(), backend)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s, err := model.NewSession(engine.Options{Batch: len(ids), MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	s.Tracer = engine.NewTracer(true, tf)
	if _, err := s.Prefill(ids); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "onecall.safetensors")
	if err := s.Tracer.Write(out); err != nil {
		t.Fatal(err)
	}
	return goldLoad(t, out)
}

func goldF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// goldDecodeRows compares every decode-step block tensor of a class in
// classes of the free run with the rows of the same position in the forced
// one-call prefill, and the decode logits with its logits; it returns the
// worst rel L2 and max abs per class, and for selection classes the number
// of rows whose sets differ (as worst[cls][0]).
func goldDecodeRows(t *testing.T, fr *goldFreeRun, one map[string]*goldTensor, classes []string) map[string][2]float64 {
	t.Helper()
	P := fr.S + len(fr.decode)
	worst := map[string][2]float64{}
	note := func(cls string, rel, mx float64) {
		if math.IsNaN(rel) || math.IsNaN(mx) {
			rel, mx = math.Inf(1), math.Inf(1)
		}
		w := worst[cls]
		worst[cls] = [2]float64{math.Max(w[0], rel), math.Max(w[1], mx)}
	}
	// rows returns the rows of position S+i of p, a [B, P, ...] or [B·P, ...]
	// tensor, for B rows of rest elements.
	rows := func(p *goldTensor, B, rest, i int) []float64 {
		var got []float64
		for b := 0; b < B; b++ {
			o := (b*P + fr.S + i) * rest
			got = append(got, p.f[o:o+rest]...)
		}
		return got
	}
	for name, d := range fr.trace {
		m := blockName.FindStringSubmatch(name)
		if m == nil || m[1] == "prefill" || !slices.Contains(classes, m[3]) {
			continue
		}
		var i int
		fmt.Sscanf(m[1], "decode%d", &i)
		p := one["prefill.L"+m[2]+"."+m[3]]
		B := d.shape[0]
		if p == nil || len(p.f) != P*len(d.f) {
			t.Errorf("%s: the one-call prefill has no matching prefill.L%s.%s", name, m[2], m[3])
			continue
		}
		got := &goldTensor{shape: d.shape, f: rows(p, B, len(d.f)/B, i)}
		if selectionClasses[m[3]] {
			differ := 0
			for _, eq := range goldRowsEqual(got, d) {
				if !eq {
					differ++
				}
			}
			w := worst[m[3]]
			worst[m[3]] = [2]float64{w[0] + float64(differ), 0}
			continue
		}
		rel, mx := goldRelL2(got.f, d.f)
		note(m[3], rel, mx)
	}
	lg := one["prefill.logits_full"]
	for i, d := range fr.decode {
		rel, mx := goldRelL2(rows(lg, fr.B, fr.V, i), goldF64(d))
		note("logits", rel, mx)
	}
	return worst
}

// oneCallTols bound the fast kernels' block-local difference between a
// decode step and the same position of the one-call prefill: one row
// summed in another order than many. 2-4x the worst measured (portable and
// AVX2, 2026-12; README, CPU: stream_out 1.8e-4): stream_out 1.8e-4 /
// 7.8e-3 (one bf16 ulp), ffn_in 2.9e-5 / 4.9e-4, the other dense classes 0
// (one bound for them all: a bf16 or fp8 rounding that flips at another
// level moves them to the stream's level), hc_attn ≤ 2.5e-7 / 4.8e-7,
// hc_ffn and pre_out ≤ 3.6e-5 / 3.9e-5, gate weights 2.5e-6, logits
// 9.9e-8 / 2.9e-6. With the reference kernels everything is bit-identical
// (measured 0), and required so.
var oneCallTols = map[string]goldTol{
	"attn_in": {5e-4, 0.02}, "attn_out": {5e-4, 0.02}, "ffn_in": {5e-4, 0.02},
	"moe_out": {5e-4, 0.02}, "stream_out": {5e-4, 0.02}, "engram_out": {5e-4, 0.02},
	"hc_attn_pre": {1e-6, 2e-6}, "hc_attn_post": {1e-6, 2e-6}, "hc_attn_comb": {1e-6, 2e-6},
	"hc_ffn_pre": {1e-4, 1.5e-4}, "hc_ffn_post": {1e-4, 1.5e-4}, "hc_ffn_comb": {1e-4, 1.5e-4},
	"pre_out": {1e-4, 1.5e-4}, "gate_weights": {1e-5, 1e-5}, "logits": {3e-7, 1e-5},
	"gate_indices": {0, 0}, // rows whose expert sets differ: measured 0
}

// oneCallTolsAVX512 widen two classes for the AVX-512 kernels, whose decode
// (one row) and prefill (many rows) paths round the expert products apart
// more than the AVX2 ones: measured on the device machine's AVX-512 Xeon
// (2026-12-02, backends/cuda/NOTES.md) moe_out 1.89e-3 and stream_out
// 6.63e-4; bounds 2.6x and 3x that. Still under the golden README's
// block-local noise for moe_out (4.3e-3).
var oneCallTolsAVX512 = map[string]goldTol{
	"moe_out": {5e-3, 0.02}, "stream_out": {2e-3, 0.02},
}

// TestGoldenDecodeVsOneCallBlockLocal runs the golden prompt and decode
// tokens free, then the one-call prefill of prompt + decode tokens with
// every block's inputs forced to those the decode run had, and compares each
// decode step's block tensors and logits with that position of the one-call
// prefill (golden README: decode equals a one-call prefill block-locally).
// The index selections are left out: decode and prefill number their rows
// differently (window ring slots, the decode patch of spec §8.1).
func TestGoldenDecodeVsOneCallBlockLocal(t *testing.T) {
	gf, err := safetensors.Open(goldenPath())
	if err != nil {
		t.Fatal(err)
	}
	full := ids2(t, gf, "inputs.full_input_ids")
	gf.Close()
	classes := slices.Sorted(maps.Keys(oneCallTols))
	for _, k := range goldKernelSets {
		goldWithKernels(t, k, func(t *testing.T, backend string) {
			fr := goldRunFreeKernels(t, k.fast)
			w := goldDecodeRows(t, fr, goldOneCallForced(t, backend, fr, full), classes)
			for _, c := range classes {
				lim := oneCallTols[c]
				if o, ok := oneCallTolsAVX512[c]; ok && k.fast && k.level == fast.AVX512 {
					lim = o
				}
				if !k.fast {
					lim = goldTol{}
				}
				got, ok := w[c]
				t.Logf("%-12s worst rel %.2e abs %.2e (bounds %.0e / %.0e)", c, got[0], got[1], lim.rel, lim.abs)
				if !ok {
					t.Errorf("no %s compared", c)
				} else if !(got[0] <= lim.rel) || !(got[1] <= lim.abs) {
					t.Errorf("%s: decode vs one-call prefill block-local: rel %.2e abs %.2e, want ≤ %.0e / %.0e", c, got[0], got[1], lim.rel, lim.abs)
				}
			}
		})
	}
}
