package deepseekv4

import (
	"fmt"
	"math"
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
	for _, ch := range []func() error{c.validateBounds, c.validateSizes, c.validateDims, c.validateMoE, c.validateSources, c.validateLayout, c.validateRope, c.validateEngram, c.validateMisc} {
		if err := ch(); err != nil {
			return err
		}
	}
	return nil
}

// A bound is the largest value of a config field that sizes work: the
// graph builder, the parameter accounting and every session grow with it,
// so a slip such as "n_layers": 100000 is refused at once instead of
// building until memory runs out. Each limit is far above the released
// configuration (testdata/configs/deepseek-v41-flash.json; the runtime
// fields: DefaultConfig) and low enough that the products of sizes the
// accounting forms stay far below 2^63.
type bound struct {
	name string
	v    int64
	max  int64
	why  string
}

func (c *Config) bounds() []bound {
	return []bound{
		{"vocab_size", int64(c.VocabSize), 1 << 22, "32x the release's 129280; the embedding and the head are vocab_size x dim"},
		{"dim", int64(c.Dim), 1 << 16, "12x the release's 5120"},
		{"moe_inter_dim", int64(c.MoEInterDim), 1 << 16, "28x the release's 2304"},
		{"n_layers", int64(c.NLayers), 256, "6x the release's 40; the graph holds every layer"},
		{"n_mtp_layers", int64(c.NMTPLayers), 64, "21x the release's 3"},
		{"n_heads", int64(c.NHeads), 1024, "16x the release's 64"},
		{"n_routed_experts", int64(c.NRoutedExperts), 1 << 14, "42x the release's 384"},
		{"q_lora_rank", int64(c.QLoraRank), 1 << 16, "51x the release's 1280"},
		{"head_dim", int64(c.HeadDim), 1 << 14, "32x the release's 512"},
		{"o_lora_rank", int64(c.OLoraRank), 1 << 16, "64x the release's 1024"},
		{"window_size", int64(c.WindowSize), 1 << 20, "8192x the release's 128; it sizes every layer's window cache"},
		{"index_n_heads", int64(c.IndexNHeads), 1024, "32x the release's 32"},
		{"index_head_dim", int64(c.IndexHeadDim), 1 << 14, "128x the release's 128"},
		{"index_topk", int64(c.IndexTopK), 1 << 20, "2048x the release's 512"},
		{"candidate_topk_blocks", int64(c.CandidateTopKBlocks), 1 << 20, "512x the release's 2048"},
		{"candidate_block_size", int64(c.CandidateBlockSize), 1 << 16, "8192x the release's 8"},
		{"hc_mult", int64(c.HCMult), 64, "16x the release's 4; every token mixes hc_mult^2 streams"},
		{"hc_sinkhorn_iters", int64(c.HCSinkhornIters), 100, "5x the release's 20; the graph holds every iteration of every mix"},
		{"max_batch_size", int64(c.MaxBatchSize), 1 << 16, "16384x the default 4"},
		{"max_seq_len", int64(c.MaxSeqLen), 1 << 24, "16x the release's max_position_embeddings 1048576"},
		{"original_seq_len", int64(c.OriginalSeqLen), 1 << 24, "256x the release's 65536"},
		{"engram_max_ngram_size", int64(c.EngramMaxNgramSize), 16, "4x the release's 4"},
		{"engram_n_heads", int64(c.EngramNHeads), 64, "8x the release's 8"},
		{"engram_head_dim", int64(c.EngramHeadDim), 1 << 14, "64x the release's 256"},
		{"engram_vocab_size", c.EngramVocabSize, 1 << 32, "268x the release's 16000000; each table prime lies just above it"},
	}
}

// validateBounds checks every bound, and the Engram table rows they imply,
// before anything is computed from the sizes.
func (c *Config) validateBounds() error {
	for _, b := range c.bounds() {
		if b.v > b.max {
			return fmt.Errorf("%s: is %d, want <= %d (%s)", b.name, b.v, b.max, b.why)
		}
	}
	for i, r := range c.CompressRatios {
		if r > 1024 {
			return fmt.Errorf("compress_ratios: entry %d is %d, want <= 1024 (512x the release's largest, 2)", i, r)
		}
	}
	// One Engram layer's tables hold about (max_ngram-1) x heads primes,
	// each just above engram_vocab_size: 3.8e8 rows in the release.
	if len(c.EngramLayerIDs) > 0 && c.EngramMaxNgramSize > 1 && c.EngramNHeads > 0 {
		rows := int64(c.EngramMaxNgramSize-1) * int64(c.EngramNHeads) * c.EngramVocabSize
		if rows > 1<<40 {
			return fmt.Errorf("engram_vocab_size: (engram_max_ngram_size-1) x engram_n_heads x engram_vocab_size = %d table rows per layer, want <= %d (2800x the release's 3.8e8)", rows, int64(1)<<40)
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
	// Every RoPE table records the factor, YaRN on or off (ir's rope_table rule).
	if c.RopeFactor <= 0 {
		return fmt.Errorf("rope_factor: is %g, want > 0", c.RopeFactor)
	}
	if c.OriginalSeqLen > 0 && compressed {
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
	if c.EngramCompressedVocabSize > int64(c.VocabSize) {
		return fmt.Errorf("engram_compressed_vocab_size: is %d, want <= vocab_size = %d (the token map folds the raw ids)", c.EngramCompressedVocabSize, c.VocabSize)
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
	// The kernels compute in float32: a value past its range is +-Inf there.
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"gate_temp", c.GateTemp}, {"route_scale", c.RouteScale}, {"swiglu_limit", c.SwiGLULimit}, {"norm_eps", c.NormEps},
		{"rope_theta", c.RopeTheta}, {"compress_rope_theta", c.CompressRopeTheta}, {"rope_factor", c.RopeFactor},
		{"beta_fast", c.BetaFast}, {"beta_slow", c.BetaSlow}, {"hc_eps", c.HCEps}, {"temperature", c.Temperature},
	} {
		if math.Abs(f.v) > math.MaxFloat32 {
			return fmt.Errorf("%s: is %g, want at most %g in magnitude (the kernels compute in float32)", f.name, f.v, math.MaxFloat32)
		}
	}
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

// CheckTokenMap checks a checkpoint's Engram token map (its values and the
// safetensors metadata, if any) against the config: one entry per raw id,
// each a compressed id in [0, engram_compressed_vocab_size) or -1 (a token
// in no n-gram, e.g. of an image span), and a compressed id for the pad.
// Metadata compressed_vocab_size and pad_id, when present, must agree.
func (c *Config) CheckTokenMap(m []int64, meta map[string]string) error {
	if len(m) != c.VocabSize {
		return fmt.Errorf("has %d entries, want one per raw id: vocab_size = %d", len(m), c.VocabSize)
	}
	for _, kv := range []struct {
		key  string
		want int64
	}{{"compressed_vocab_size", c.EngramCompressedVocabSize}, {"pad_id", int64(c.EngramPadID)}} {
		if v, ok := meta[kv.key]; ok && v != fmt.Sprint(kv.want) {
			return fmt.Errorf("metadata %s is %s, the config says %d", kv.key, v, kv.want)
		}
	}
	for id, v := range m {
		if v < -1 || v >= c.EngramCompressedVocabSize {
			return fmt.Errorf("entry %d is %d, want a compressed id in [0, engram_compressed_vocab_size = %d) or -1", id, v, c.EngramCompressedVocabSize)
		}
	}
	if m[c.EngramPadID] < 0 {
		return fmt.Errorf("entry %d (engram_pad_id) is -1, want a compressed id", c.EngramPadID)
	}
	return nil
}
