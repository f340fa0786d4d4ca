package deepseekv4

import (
	"fmt"
	"strings"
)

// fp8BlockSize is the reference's fp8/fp4 block (one scale per 32 values).
const fp8BlockSize = 32

// Validate checks the config against what the reference asserts or needs to
// run the text model. It returns the first problem as a one-line error that
// starts with the config's Source and names the field.
func (c *Config) Validate() error {
	if err := c.validate(); err != nil {
		src := c.Source
		if src == "" {
			src = "config"
		}
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}

func (c *Config) validate() error {
	for _, ch := range []func() error{c.validateSizes, c.validateDims, c.validateMoE, c.validateSources, c.validateLayout, c.validateRope, c.validateEngram, c.validateMisc} {
		if err := ch(); err != nil {
			return err
		}
	}
	return nil
}

func positive(name string, v int) error {
	if v <= 0 {
		return fmt.Errorf("%s: is %d, want > 0", name, v)
	}
	return nil
}

func (c *Config) validateSizes() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"dim", c.Dim}, {"moe_inter_dim", c.MoEInterDim}, {"n_layers", c.NLayers},
		{"n_heads", c.NHeads}, {"q_lora_rank", c.QLoraRank}, {"head_dim", c.HeadDim}, {"rope_head_dim", c.RopeHeadDim},
		{"o_groups", c.OGroups}, {"o_lora_rank", c.OLoraRank}, {"window_size", c.WindowSize},
		{"hc_mult", c.HCMult}, {"hc_sinkhorn_iters", c.HCSinkhornIters},
		{"max_batch_size", c.MaxBatchSize}, {"max_seq_len", c.MaxSeqLen},
	} {
		if err := positive(f.name, f.v); err != nil {
			return err
		}
	}
	if c.NMTPLayers < 0 {
		return fmt.Errorf("n_mtp_layers: is %d, want >= 0", c.NMTPLayers)
	}
	if want := c.NLayers + c.NMTPLayers; len(c.CompressRatios) != want {
		return fmt.Errorf("compress_ratios: has %d entries, want n_layers+n_mtp_layers = %d", len(c.CompressRatios), want)
	}
	for i, r := range c.CompressRatios {
		if r < 0 {
			return fmt.Errorf("compress_ratios: entry %d is %d, want >= 0", i, r)
		}
	}
	return nil
}

func (c *Config) validateDims() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"dim", c.Dim}, {"moe_inter_dim", c.MoEInterDim}, {"q_lora_rank", c.QLoraRank},
		{"head_dim", c.HeadDim}, {"o_lora_rank", c.OLoraRank},
	} {
		if f.v%fp8BlockSize != 0 {
			return fmt.Errorf("%s: is %d, want a multiple of %d (fp8/fp4 block size)", f.name, f.v, fp8BlockSize)
		}
	}
	if c.NHeads%c.OGroups != 0 {
		return fmt.Errorf("o_groups: n_heads = %d is not divisible by o_groups = %d", c.NHeads, c.OGroups)
	}
	if c.RopeHeadDim%2 != 0 {
		return fmt.Errorf("rope_head_dim: is %d, want an even number", c.RopeHeadDim)
	}
	if c.RopeHeadDim > c.HeadDim {
		return fmt.Errorf("rope_head_dim: is %d, want <= head_dim = %d", c.RopeHeadDim, c.HeadDim)
	}
	if c.HCMult < 1 {
		return fmt.Errorf("hc_mult: is %d, want >= 1", c.HCMult)
	}
	return nil
}

func (c *Config) validateMoE() error {
	if err := positive("n_routed_experts", c.NRoutedExperts); err != nil {
		return err
	}
	if c.NActivatedExperts <= 0 || c.NActivatedExperts > c.NRoutedExperts {
		return fmt.Errorf("n_activated_experts: is %d, want 1..n_routed_experts = %d", c.NActivatedExperts, c.NRoutedExperts)
	}
	if c.NSharedExperts != 1 {
		return fmt.Errorf("n_shared_experts: is %d, want 1 (asserted by the reference)", c.NSharedExperts)
	}
	switch c.ScoreFunc {
	case "softmax", "sigmoid", "sqrtsoftplus":
	default:
		return fmt.Errorf("score_func: unknown value %q, want softmax, sigmoid or sqrtsoftplus", c.ScoreFunc)
	}
	if c.GateTemp <= 0 {
		return fmt.Errorf("gate_temp: is %g, want > 0", c.GateTemp)
	}
	if c.SwiGLULimit < 0 {
		return fmt.Errorf("swiglu_limit: is %g, want >= 0 (0 = off)", c.SwiGLULimit)
	}
	switch c.Dtype {
	case "fp8", "bf16":
	default:
		return fmt.Errorf("dtype: unknown value %q, want fp8 or bf16", c.Dtype)
	}
	switch c.ExpertDtype {
	case "fp4", "fp8", "bf16":
	default:
		return fmt.Errorf("expert_dtype: unknown value %q, want fp4, fp8 or bf16", c.ExpertDtype)
	}
	return nil
}

// validateSources checks the source-layer lists themselves.
func (c *Config) validateSources() error {
	check := func(name string, ids []int) error {
		seen := map[int]bool{}
		for _, l := range ids {
			if l < 0 || l >= c.NLayers {
				return fmt.Errorf("%s: layer %d out of range 0..%d (n_layers = %d)", name, l, c.NLayers-1, c.NLayers)
			}
			if seen[l] {
				return fmt.Errorf("%s: layer %d listed twice", name, l)
			}
			seen[l] = true
			if c.CompressRatios[l] == 0 {
				return fmt.Errorf("%s: layer %d has compress ratio 0 (a source needs ratio > 0)", name, l)
			}
		}
		return nil
	}
	if err := check("kv_source_layers", c.KVSourceLayers); err != nil {
		return err
	}
	if err := check("index_source_layers", c.IndexSourceLayers); err != nil {
		return err
	}
	if len(c.IndexSourceLayers) > 0 {
		if err := positive("index_n_heads", c.IndexNHeads); err != nil {
			return err
		}
		if err := positive("index_head_dim", c.IndexHeadDim); err != nil {
			return err
		}
		if c.IndexHeadDim%fp8BlockSize != 0 {
			return fmt.Errorf("index_head_dim: is %d, want a multiple of %d (fp4 block size)", c.IndexHeadDim, fp8BlockSize)
		}
		if c.RopeHeadDim > c.IndexHeadDim {
			return fmt.Errorf("rope_head_dim: is %d, want <= index_head_dim = %d", c.RopeHeadDim, c.IndexHeadDim)
		}
		if err := positive("index_topk", c.IndexTopK); err != nil {
			return err
		}
	}
	if c.CandidateSourceLayer >= 0 {
		l := c.CandidateSourceLayer
		if l >= c.NLayers {
			return fmt.Errorf("candidate_source_layer: layer %d out of range 0..%d (n_layers = %d)", l, c.NLayers-1, c.NLayers)
		}
		if !indexSet(c.IndexSourceLayers)[l] {
			return fmt.Errorf("candidate_source_layer: layer %d is not an index source (index_source_layers)", l)
		}
		if err := positive("candidate_topk_blocks", c.CandidateTopKBlocks); err != nil {
			return err
		}
		if err := positive("candidate_block_size", c.CandidateBlockSize); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateRope() error {
	if c.RopeTheta <= 0 {
		return fmt.Errorf("rope_theta: is %g, want > 0", c.RopeTheta)
	}
	compressed := false
	for _, r := range c.CompressRatios {
		compressed = compressed || r > 0
	}
	if compressed && c.CompressRopeTheta <= 0 {
		return fmt.Errorf("compress_rope_theta: is %g, want > 0", c.CompressRopeTheta)
	}
	if c.OriginalSeqLen < 0 {
		return fmt.Errorf("original_seq_len: is %d, want >= 0 (0 = YaRN off)", c.OriginalSeqLen)
	}
	if c.OriginalSeqLen > 0 && compressed {
		if c.RopeFactor <= 0 {
			return fmt.Errorf("rope_factor: is %g, want > 0 (YaRN is on: original_seq_len > 0)", c.RopeFactor)
		}
		if c.BetaFast <= 0 || c.BetaSlow <= 0 {
			return fmt.Errorf("beta_fast/beta_slow: are %g/%g, want > 0 (YaRN is on)", c.BetaFast, c.BetaSlow)
		}
	}
	return nil
}

func (c *Config) validateEngram() error {
	if len(c.EngramLayerIDs) == 0 {
		if len(c.EngramNumEmbeddings) != 0 {
			return fmt.Errorf("engram_num_embeddings: has %d entries, want len(engram_layer_ids) = 0", len(c.EngramNumEmbeddings))
		}
		return nil
	}
	seen := map[int]bool{}
	for _, l := range c.EngramLayerIDs {
		if l < 0 || l >= c.NLayers {
			return fmt.Errorf("engram_layer_ids: layer %d out of range 0..%d (n_layers = %d)", l, c.NLayers-1, c.NLayers)
		}
		if seen[l] {
			return fmt.Errorf("engram_layer_ids: layer %d listed twice", l)
		}
		seen[l] = true
	}
	if len(c.EngramNumEmbeddings) != len(c.EngramLayerIDs) {
		return fmt.Errorf("engram_num_embeddings: has %d entries, want len(engram_layer_ids) = %d", len(c.EngramNumEmbeddings), len(c.EngramLayerIDs))
	}
	if c.EngramHeadDim <= 0 || c.EngramHeadDim%fp8BlockSize != 0 {
		return fmt.Errorf("engram_head_dim: is %d, want a positive multiple of %d", c.EngramHeadDim, fp8BlockSize)
	}
	if c.EngramPadID < 0 || c.EngramPadID >= c.VocabSize {
		return fmt.Errorf("engram_pad_id: is %d, want 0..vocab_size-1 = %d", c.EngramPadID, c.VocabSize-1)
	}
	layout, err := EngramLayout(c)
	if err != nil {
		return err
	}
	for i, el := range layout {
		if el.Rows != c.EngramNumEmbeddings[i] {
			return fmt.Errorf("engram_num_embeddings: entry %d (layer %d) is %d, want the sum of its primes = %d", i, el.Layer, c.EngramNumEmbeddings[i], el.Rows)
		}
	}
	return nil
}

func (c *Config) validateMisc() error {
	if c.NormEps < 0 {
		return fmt.Errorf("norm_eps: is %g, want >= 0", c.NormEps)
	}
	if c.HCEps < 0 {
		return fmt.Errorf("hc_eps: is %g, want >= 0", c.HCEps)
	}
	if c.Temperature < 0 {
		return fmt.Errorf("temperature: is %g, want >= 0", c.Temperature)
	}
	return nil
}

// String renders a short one-line summary of the text model.
func (c *Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deepseekv4: %d layers (%s), dim %d, %d heads x %d, %d/%d experts, vocab %d",
		c.NLayers, LayoutSummary(c.Layers()), c.Dim, c.NHeads, c.HeadDim, c.NActivatedExperts, c.NRoutedExperts, c.VocabSize)
	return b.String()
}
