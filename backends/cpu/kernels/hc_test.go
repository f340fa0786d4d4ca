package kernels

import (
	"fmt"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
)

func TestHCSplitSinkhornGolden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	const tokens, hc = 15, 4
	pre, post, comb := make([]float32, tokens*hc), make([]float32, tokens*hc), make([]float32, tokens*hc*hc)
	HCSplitSinkhorn(pre, post, comb, gemmF32(t, f, "hc_split_sinkhorn.mixes"), tokens, hc,
		gemmF32(t, f, "hc_split_sinkhorn.scale"), gemmF32(t, f, "hc_split_sinkhorn.base"), 20, 1e-6)
	gemmCheckRel(t, "hc_split_sinkhorn.pre", pre, gemmF32(t, f, "hc_split_sinkhorn.pre"), 1e-6, 1e-6)
	gemmCheckRel(t, "hc_split_sinkhorn.post", post, gemmF32(t, f, "hc_split_sinkhorn.post"), 1e-6, 1e-6)
	gemmCheckRel(t, "hc_split_sinkhorn.comb", comb, gemmF32(t, f, "hc_split_sinkhorn.comb"), 1e-6, 1e-6)
}

// hcTestCkpt opens the tiny checkpoint (both shards, through the index).
func hcTestCkpt(t *testing.T) *safetensors.Set {
	t.Helper()
	s, err := safetensors.OpenDir(gemmTinyDir)
	if err != nil {
		t.Skipf("tiny checkpoint not available: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hcTestMixes runs HCMixes + HCSplitSinkhorn with the named coefficient set
// (e.g. "layers.3.hc_attn") on the stream h [tokens, 4, 128].
func hcTestMixes(t *testing.T, ck gemmSource, set string, h []float32, tokens int) (pre, post, comb []float32) {
	const hc, dim = 4, 128
	mixes := make([]float32, tokens*hcMix(hc))
	HCMixes(mixes, h, tokens, hc, dim, gemmF32(t, ck, set+"_fn"), 1e-20)
	pre, post, comb = make([]float32, tokens*hc), make([]float32, tokens*hc), make([]float32, tokens*hc*hc)
	HCSplitSinkhorn(pre, post, comb, mixes, tokens, hc, gemmF32(t, ck, set+"_scale"), gemmF32(t, ck, set+"_base"), 20, 1e-6)
	return pre, post, comb
}

// TestHCLayer3Golden: given the golden input stream of layer 3
// (prefill.L2.stream_out), the attention hc mixes must match
// prefill.L3.hc_attn_{pre,post,comb} (README: <= 1e-5 rel), and
// RMSNorm(HCPre(stream, pre_in)) must match prefill.L3.attn_in.
func TestHCLayer3Golden(t *testing.T) {
	g := gemmOpen(t, "golden.safetensors")
	ck := hcTestCkpt(t)
	const tokens, hc, dim = 58, 4, 128
	h := gemmF32(t, g, "prefill.L2.stream_out")
	pre, post, comb := hcTestMixes(t, ck, "layers.3.hc_attn", h, tokens)
	gemmCheckRel(t, "prefill.L3.hc_attn_pre", pre, gemmF32(t, g, "prefill.L3.hc_attn_pre"), 1e-5, 1e-6)
	gemmCheckRel(t, "prefill.L3.hc_attn_post", post, gemmF32(t, g, "prefill.L3.hc_attn_post"), 1e-5, 1e-6)
	gemmCheckRel(t, "prefill.L3.hc_attn_comb", comb, gemmF32(t, g, "prefill.L3.hc_attn_comb"), 1e-5, 1e-6)

	x := make([]float32, tokens*dim)
	HCPre(x, h, gemmF32(t, g, "prefill.L3.pre_in"), tokens, hc, dim)
	RMSNorm(x, x, tokens, dim, gemmF32(t, ck, "layers.3.attn_norm.weight"), 1e-20)
	gemmCheckULP(t, "prefill.L3.attn_in", x, gemmF32(t, g, "prefill.L3.attn_in"))
}

// TestHCBlocksGolden checks the whole hyper-connection data flow of every
// block, block-locally, for the prefill and all decode steps: attention and
// FFN mixes, attn_in, the stream after attention (HCPost of the golden
// attn_out), ffn_in and stream_out (HCPost of the golden moe_out).
func TestHCBlocksGolden(t *testing.T) {
	g := gemmOpen(t, "golden.safetensors")
	ck := hcTestCkpt(t)
	phases := []string{"prefill"}
	for i := range 12 {
		phases = append(phases, fmt.Sprintf("decode%02d", i))
	}
	worst := map[string]float64{}
	for _, ph := range phases {
		for l := range 8 {
			hcTestBlock(t, g, ck, ph, l, worst)
		}
	}
	for _, k := range []string{"hc_attn_pre", "hc_attn_post", "hc_attn_comb", "hc_ffn_pre", "hc_ffn_post", "hc_ffn_comb", "attn_in", "ffn_in", "stream_out"} {
		t.Logf("worst over %d phases x 8 layers: %-13s %g", len(phases), k, worst[k])
	}
}

func hcTestBlock(t *testing.T, g, ck gemmSource, ph string, l int, worst map[string]float64) {
	const hc, dim = 4, 128
	p := fmt.Sprintf("%s.L%d.", ph, l)
	want := func(name string) []float32 { return gemmF32(t, g, p+name) }
	ann := want("attn_in")
	tokens := len(ann) / dim

	h := hcTestBlockInput(t, g, ph, l, tokens)
	rel := func(name string, got []float32) {
		worst[name] = max(worst[name], gemmCheckRel(t, p+name, got, want(name), 1e-5, 1e-6))
	}
	ulp := func(name string, got, w []float32) {
		worst[name] = max(worst[name], float64(gemmCheckULP(t, p+name, got, w)))
	}

	aPre, aPost, aComb := hcTestMixes(t, ck, fmt.Sprintf("layers.%d.hc_attn", l), h, tokens)
	rel("hc_attn_pre", aPre)
	rel("hc_attn_post", aPost)
	rel("hc_attn_comb", aComb)

	x := make([]float32, tokens*dim)
	HCPre(x, h, want("pre_in"), tokens, hc, dim)
	RMSNorm(x, x, tokens, dim, gemmF32(t, ck, fmt.Sprintf("layers.%d.attn_norm.weight", l)), 1e-20)
	ulp("attn_in", x, ann)

	// Stream after attention from the golden attention output and mixes.
	mid := make([]float32, tokens*hc*dim)
	HCPost(mid, want("attn_out"), h, want("hc_attn_post"), want("hc_attn_comb"), tokens, hc, dim)

	fPre, fPost, fComb := hcTestMixes(t, ck, fmt.Sprintf("layers.%d.hc_ffn", l), mid, tokens)
	rel("hc_ffn_pre", fPre)
	rel("hc_ffn_post", fPost)
	rel("hc_ffn_comb", fComb)

	HCPre(x, mid, want("hc_attn_pre"), tokens, hc, dim)
	RMSNorm(x, x, tokens, dim, gemmF32(t, ck, fmt.Sprintf("layers.%d.ffn_norm.weight", l)), 1e-20)
	ulp("ffn_in", x, want("ffn_in"))

	out := make([]float32, tokens*hc*dim)
	HCPost(out, want("moe_out"), mid, want("hc_ffn_post"), want("hc_ffn_comb"), tokens, hc, dim)
	ulp("stream_out", out, want("stream_out"))
}

// hcTestBlockInput returns the golden input stream of block l: the
// embedding repeated hc times for layer 0, the Engram output for Engram
// layers, else the previous block's stream_out.
func hcTestBlockInput(t *testing.T, g gemmSource, ph string, l, tokens int) []float32 {
	const hc, dim = 4, 128
	if l == 0 {
		e := gemmF32(t, g, ph+".embed")
		h := make([]float32, 0, tokens*hc*dim)
		for tk := range tokens {
			for range hc {
				h = append(h, e[tk*dim:(tk+1)*dim]...)
			}
		}
		return h
	}
	if x, ok := g.Get(fmt.Sprintf("%s.L%d.engram_out", ph, l)); ok {
		v, err := x.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return gemmF32(t, g, fmt.Sprintf("%s.L%d.stream_out", ph, l-1))
}
