package deepseekv4

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Config holds every field of the reference ModelArgs (spec §2.1). JSON tags
// are the key names of the flat inference config (`inference/config.json`);
// ParseConfig also accepts a Hugging Face config.json and maps its key names.
//
// Only the text model is built from it. The vision_*, dspark_* and
// n_mtp_layers fields are kept so that IgnoredParts can report them.
type Config struct {
	// Source names the file (or other origin) the config was read from; it
	// prefixes every error of ParseConfig and Validate.
	Source string `json:"-"`

	// Runtime fields (generate.py); not in the released config files.
	MaxBatchSize int     `json:"max_batch_size"`
	MaxSeqLen    int     `json:"max_seq_len"`
	Temperature  float64 `json:"temperature"`

	Dtype       string `json:"dtype"`        // plain Linear weights: "fp8" or "bf16"
	ExpertDtype string `json:"expert_dtype"` // routed experts: "fp4", "fp8" or "bf16"

	VocabSize         int     `json:"vocab_size"`
	Dim               int     `json:"dim"`
	MoEInterDim       int     `json:"moe_inter_dim"`
	NLayers           int     `json:"n_layers"`
	NMTPLayers        int     `json:"n_mtp_layers"` // DSpark draft layers: ignored
	NHeads            int     `json:"n_heads"`
	NRoutedExperts    int     `json:"n_routed_experts"`
	NSharedExperts    int     `json:"n_shared_experts"`
	NActivatedExperts int     `json:"n_activated_experts"`
	ScoreFunc         string  `json:"score_func"`
	GateTemp          float64 `json:"gate_temp"`
	NormTopKProb      bool    `json:"norm_topk_prob"`
	RouteScale        float64 `json:"route_scale"`
	SwiGLULimit       float64 `json:"swiglu_limit"`
	QLoraRank         int     `json:"q_lora_rank"`
	HeadDim           int     `json:"head_dim"`
	RopeHeadDim       int     `json:"rope_head_dim"`
	NormEps           float64 `json:"norm_eps"`
	OGroups           int     `json:"o_groups"`
	OLoraRank         int     `json:"o_lora_rank"`
	WindowSize        int     `json:"window_size"`

	CompressRatios    []int `json:"compress_ratios"` // n_layers + n_mtp_layers entries
	KVSourceLayers    []int `json:"kv_source_layers"`
	IndexSourceLayers []int `json:"index_source_layers"`

	CompressRopeTheta float64 `json:"compress_rope_theta"`
	OriginalSeqLen    int     `json:"original_seq_len"`
	RopeTheta         float64 `json:"rope_theta"`
	RopeFactor        float64 `json:"rope_factor"`
	BetaFast          float64 `json:"beta_fast"`
	BetaSlow          float64 `json:"beta_slow"`

	IndexNHeads  int `json:"index_n_heads"`
	IndexHeadDim int `json:"index_head_dim"`
	IndexTopK    int `json:"index_topk"`

	CandidateSourceLayer int `json:"candidate_source_layer"` // < 0 = off
	CandidateTopKBlocks  int `json:"candidate_topk_blocks"`
	CandidateBlockSize   int `json:"candidate_block_size"`

	HCMult          int     `json:"hc_mult"`
	HCSinkhornIters int     `json:"hc_sinkhorn_iters"`
	HCEps           float64 `json:"hc_eps"`

	EngramLayerIDs            []int   `json:"engram_layer_ids"`
	EngramNumEmbeddings       []int64 `json:"engram_num_embeddings"`
	EngramMaxNgramSize        int     `json:"engram_max_ngram_size"`
	EngramVocabSize           int64   `json:"engram_vocab_size"`
	EngramNHeads              int     `json:"engram_n_heads"`
	EngramHeadDim             int     `json:"engram_head_dim"`
	EngramPadID               int     `json:"engram_pad_id"`
	EngramCompressedVocabSize int64   `json:"engram_compressed_vocab_size"`

	// Vision encoder: not part of the text model, ignored.
	VisionNLayers         int      `json:"vision_n_layers"`
	VisionDim             int      `json:"vision_dim"`
	VisionNHeads          int      `json:"vision_n_heads"`
	VisionInterDim        int      `json:"vision_inter_dim"`
	VisionPatchSize       int      `json:"vision_patch_size"`
	VisionDownsampleRatio int      `json:"vision_downsample_ratio"`
	VisionMaxNToken       int      `json:"vision_max_n_token"`
	VisionMinPixels       int      `json:"vision_min_pixels"`
	VisionMaxWHRatio      *float64 `json:"vision_max_wh_ratio"`
	VisionRopeTheta       float64  `json:"vision_rope_theta"`
	ImageTokenID          int      `json:"image_token_id"`

	// DSpark / MTP draft model: ignored (only used by speculative decoding).
	DSparkBlockSize         int   `json:"dspark_block_size"`
	DSparkNoiseTokenID      int   `json:"dspark_noise_token_id"`
	DSparkTargetLayerIDs    []int `json:"dspark_target_layer_ids"`
	DSparkMarkovRank        int   `json:"dspark_markov_rank"`
	DSparkNRoutedExperts    int   `json:"dspark_n_routed_experts"`
	DSparkNActivatedExperts int   `json:"dspark_n_activated_experts"`

	// MaxPositionEmbeddings is HF's max_position_embeddings (1 048 576 for the
	// release). Informational only: it does not set the runtime MaxSeqLen.
	MaxPositionEmbeddings int `json:"max_position_embeddings"`

	// hfVisionConfig records a non-null vision_config object of an HF config.
	hfVisionConfig bool
}

// DefaultConfig returns the ModelArgs defaults of spec §2.1.
func DefaultConfig() *Config {
	return &Config{
		MaxBatchSize:         4,
		MaxSeqLen:            4096,
		Temperature:          1,
		Dtype:                "fp8",
		ExpertDtype:          "fp4",
		VocabSize:            129280,
		Dim:                  1024,
		MoEInterDim:          1024,
		NLayers:              5,
		NMTPLayers:           1,
		NHeads:               16,
		NRoutedExperts:       8,
		NSharedExperts:       1,
		NActivatedExperts:    2,
		ScoreFunc:            "sqrtsoftplus",
		GateTemp:             1.0,
		NormTopKProb:         true,
		RouteScale:           1.0,
		SwiGLULimit:          0.0,
		QLoraRank:            256,
		HeadDim:              128,
		RopeHeadDim:          32,
		NormEps:              1e-20,
		OGroups:              8,
		OLoraRank:            256,
		WindowSize:           128,
		CompressRatios:       []int{0, 2, 2, 1, 1, 0},
		KVSourceLayers:       []int{1, 3},
		IndexSourceLayers:    []int{1, 3},
		CompressRopeTheta:    40000.0,
		OriginalSeqLen:       0,
		RopeTheta:            10000.0,
		RopeFactor:           40,
		BetaFast:             32,
		BetaSlow:             1,
		IndexNHeads:          16,
		IndexHeadDim:         64,
		IndexTopK:            64,
		CandidateSourceLayer: -1,
		CandidateTopKBlocks:  0,
		CandidateBlockSize:   0,
		HCMult:               4,
		HCSinkhornIters:      20,
		HCEps:                1e-6,
		EngramMaxNgramSize:   1,
		EngramPadID:          2,
		DSparkMarkovRank:     256,
	}
}

// hfKeyNames maps Hugging Face config.json key names to flat ModelArgs names.
var hfKeyNames = map[string]string{
	"hidden_size":                "dim",
	"moe_intermediate_size":      "moe_inter_dim",
	"num_hidden_layers":          "n_layers",
	"num_nextn_predict_layers":   "n_mtp_layers",
	"num_attention_heads":        "n_heads",
	"num_experts_per_tok":        "n_activated_experts",
	"scoring_func":               "score_func",
	"routed_scaling_factor":      "route_scale",
	"qk_rope_head_dim":           "rope_head_dim",
	"rms_norm_eps":               "norm_eps",
	"sliding_window":             "window_size",
	"kv_source_layer_ids":        "kv_source_layers",
	"index_source_layer_ids":     "index_source_layers",
	"candidate_source_layer_id":  "candidate_source_layer",
	"engram_pad_token_id":        "engram_pad_id",
	"dspark_num_experts_per_tok": "dspark_n_activated_experts",
}

// hfRopeScalingKeys maps the keys of HF's rope_scaling object.
var hfRopeScalingKeys = map[string]string{
	"original_max_position_embeddings": "original_seq_len",
	"factor":                           "rope_factor",
	"beta_fast":                        "beta_fast",
	"beta_slow":                        "beta_slow",
}

// hfMarkers are keys whose presence marks a Hugging Face config.json.
var hfMarkers = []string{"text_config", "hidden_size", "num_hidden_layers", "quantization_config", "architectures", "model_type"}

// LoadConfig reads a config file; given a directory it reads config.json in it.
func LoadConfig(path string) (*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if st.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig decodes a flat inference config or a Hugging Face config.json
// (keys nested under text_config or at top level, with HF names; see
// hfKeyNames). Absent fields keep the defaults of DefaultConfig; unknown keys
// are ignored. It does not validate: call Validate.
func ParseConfig(data []byte, source string) (*Config, error) {
	if source == "" {
		source = "config"
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, jsonError(source, err, nil)
	}
	if top == nil {
		return nil, fmt.Errorf("%s: invalid JSON: top level is null, want an object", source)
	}
	flat := top
	origin := map[string]string{} // flat key -> HF key it came from
	isHF := false
	for _, k := range hfMarkers {
		if _, ok := top[k]; ok {
			isHF = true
			break
		}
	}
	if isHF {
		var err error
		flat, err = flattenHF(top, origin, source)
		if err != nil {
			return nil, err
		}
	}
	buf, err := json.Marshal(flat)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	c := DefaultConfig()
	dec := json.NewDecoder(bytes.NewReader(buf))
	if err := dec.Decode(c); err != nil {
		return nil, jsonError(source, err, origin)
	}
	c.Source = source
	if raw, ok := top["vision_config"]; ok && isHF && !isNull(raw) {
		c.hfVisionConfig = true
	}
	return c, nil
}

// flattenHF turns an HF config.json into flat ModelArgs keys.
func flattenHF(top map[string]json.RawMessage, origin map[string]string, source string) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	for k, v := range top {
		m[k] = v
	}
	// In HF configs "dtype"/"torch_dtype" name the torch dtype (e.g. "bfloat16"),
	// not ModelArgs.dtype, which comes from quantization_config.
	delete(m, "dtype")
	delete(m, "expert_dtype")
	if raw, ok := top["text_config"]; ok && !isNull(raw) {
		var tc map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tc); err != nil {
			return nil, fmt.Errorf("%s: text_config: wrong JSON type, want an object", source)
		}
		for k, v := range tc {
			if k == "dtype" || k == "torch_dtype" {
				continue
			}
			m[k] = v
		}
	}
	for hf, fl := range hfKeyNames {
		if v, ok := m[hf]; ok {
			if _, has := m[fl]; !has {
				m[fl] = v
				origin[fl] = hf
			}
		}
	}
	if raw, ok := m["rope_scaling"]; ok && !isNull(raw) {
		var rs map[string]json.RawMessage
		if err := json.Unmarshal(raw, &rs); err != nil {
			return nil, fmt.Errorf("%s: rope_scaling: wrong JSON type, want an object", source)
		}
		for hf, fl := range hfRopeScalingKeys {
			if v, ok := rs[hf]; ok {
				if _, has := m[fl]; !has {
					m[fl] = v
					origin[fl] = "rope_scaling." + hf
				}
			}
		}
	}
	if raw, ok := m["quantization_config"]; ok && !isNull(raw) {
		var qc struct {
			QuantMethod *string `json:"quant_method"`
			ExpertDtype *string `json:"expert_dtype"`
		}
		if err := json.Unmarshal(raw, &qc); err != nil {
			return nil, fmt.Errorf("%s: quantization_config: %s", source, typeErrText(err))
		}
		if qc.QuantMethod != nil {
			m["dtype"], _ = json.Marshal(*qc.QuantMethod)
			origin["dtype"] = "quantization_config.quant_method"
		}
		if qc.ExpertDtype != nil {
			m["expert_dtype"], _ = json.Marshal(*qc.ExpertDtype)
			origin["expert_dtype"] = "quantization_config.expert_dtype"
		}
	} else {
		// No quantization_config: an unquantised checkpoint.
		m["dtype"] = json.RawMessage(`"bf16"`)
		m["expert_dtype"] = json.RawMessage(`"bf16"`)
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// jsonError renders a decoding error as one line naming the field.
func jsonError(source string, err error, origin map[string]string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return fmt.Errorf("%s: wrong JSON type: got %s, want an object", source, te.Value)
		}
		name := field
		if root, _, _ := strings.Cut(field, "."); origin[root] != "" {
			name = fmt.Sprintf("%s (%s)", field, origin[root])
		}
		return fmt.Errorf("%s: %s: wrong JSON type: got %s, want %s", source, name, te.Value, goTypeName(te.Type.String()))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: invalid JSON at byte %d: %v", source, se.Offset, se)
	}
	return fmt.Errorf("%s: invalid JSON: %v", source, err)
}

func typeErrText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: wrong JSON type: got %s, want %s", te.Field, te.Value, goTypeName(te.Type.String()))
	}
	return err.Error()
}

func goTypeName(t string) string {
	switch t {
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "[]int", "[]int64":
		return "a list of integers"
	case "*float64":
		return "a number or null"
	}
	return t
}

// IgnoredParts lists the parts of the checkpoint config that the text model
// does not implement (DSpark/MTP draft layers, the vision encoder).
func (c *Config) IgnoredParts() []string {
	var out []string
	if c.NMTPLayers > 0 || c.DSparkBlockSize > 0 {
		out = append(out, fmt.Sprintf("DSpark/MTP draft model (n_mtp_layers=%d, layers %d..%d, dspark_block_size=%d): ignored, only plain decoding is implemented",
			c.NMTPLayers, c.NLayers, c.NLayers+c.NMTPLayers-1, c.DSparkBlockSize))
	}
	switch {
	case c.VisionNLayers > 0:
		out = append(out, fmt.Sprintf("vision encoder (vision_n_layers=%d, vision_dim=%d, image_token_id=%d): ignored, text only",
			c.VisionNLayers, c.VisionDim, c.ImageTokenID))
	case c.hfVisionConfig:
		out = append(out, fmt.Sprintf("vision encoder (HF vision_config, image_token_id=%d): ignored, text only", c.ImageTokenID))
	}
	sort.Strings(out)
	return out
}
