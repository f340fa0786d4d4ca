package tests

import (
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
	"github.com/ds4go/ds4/synth"
)

// unseenTols are the unseen6 set's block-local bounds: the golden README's
// limits where the measured worst is within 4x of them, else 2-4x the
// worst measured (reference kernels, portable and AVX2 levels on an AVX2
// host, 2026-12; they agree to the digits below; AVX-512 not measured).
var unseenTols = goldTols{
	classes: map[string]goldTol{
		"attn_in":      {0, 0},       // measured 0
		"engram_out":   {2e-9, 1e-6}, // measured 5.0e-10 / 2.4e-7 (the pad bug gave 6e-2)
		"attn_out":     {1e-2, 0.02}, // measured 6.1e-3 / 3.9e-3
		"ffn_in":       {5e-3, 0.05}, // measured 1.75e-3 / 1.6e-2
		"moe_out":      {1e-2, 0.1},  // measured 8.6e-3 / 4.7e-2 but for the tensor below
		"stream_out":   {1e-2, 0.1},  // measured 8.5e-3 / 6.6e-2 (decode06.L1, see below)
		"hc_attn_pre":  {1e-6, 2e-6}, // measured 2.6e-7 / 3.6e-7
		"hc_attn_post": {1e-6, 2e-6}, // measured 2.1e-7 / 7.2e-7
		"hc_attn_comb": {1e-6, 2e-6}, // measured 2.9e-7 / 3.0e-7
		// From the post-attention stream, not a forced one (see tinyTols).
		"hc_ffn_pre":  {3e-3, 0.02}, // measured 9.3e-4 / 7.0e-3
		"pre_out":     {3e-3, 0.02}, // measured 9.3e-4 / 7.0e-3
		"hc_ffn_post": {4e-3, 0.05}, // measured 1.26e-3 / 2.3e-2
		"hc_ffn_comb": {4e-3, 0.02}, // measured 1.37e-3 / 7.0e-3
		"logits":      {4e-7, 1e-5}, // measured 1.2e-7 / 3.8e-6 (reference kernels)
		"caches":      {0, 0},       // measured 0
	},
	tensors: map[string]goldTol{
		// Row 1 of this MoE output is 2.1e-2 from the reference with every
		// kernel set, the reference kernels included: its input (ffn_in)
		// carries 9e-4 of attention noise, which the fp8/fp4 quantisation
		// of the experts amplifies; selections match. Measured 1.37e-2 /
		// 4.7e-2 for the tensor.
		"decode06.L1.moe_out": {3e-2, 0.1},
	},
}

// unseenSelDiff is how many selection rows differ from the reference: the
// 6 exact bf16 ties at the index top-k boundary (testdata/unseen6) and the
// rows of the layers sharing those selections, 10 rows of 1,440 measured.
const unseenSelDiff = 10

// TestReferenceUnseenParity checks block-local parity with DeepSeek's
// reference on a checkpoint whose shapes and layer pattern the tiny set does
// not have (testdata/unseen6/README.md), with the reference kernels and at
// every kernel level. It caught the Engram pad bug (the pad is
// token_map[engram_pad_id], and tiny's map has map[2] = 2).
func TestReferenceUnseenParity(t *testing.T) {
	dir := filepath.Join(repoRoot(), "testdata", "unseen6")
	cfg, err := deepseekv4.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ck := t.TempDir()
	if err := synth.Write(ck, cfg, 1, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join(dir, "golden.safetensors")
	g := goldLoad(t, golden)
	for _, k := range goldKernelSets {
		goldWithKernels(t, k, func(t *testing.T, backend string) {
			rep := goldCompare(g, goldLoad(t, teacherRun(t, backend, m, ck, golden)), unseenTols)
			goldAssert(t, rep, unseenTols, unseenSelDiff)
		})
	}
}
