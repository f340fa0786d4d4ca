package deepseekv4

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/internal/jsonx"
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
	// hfUnused lists the unknown keys of an HF config (UnusedKeys).
	hfUnused []string
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
	data, err := fileio.ReadFile(path, 1<<20) // the released HF config.json is 3 KB
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig decodes a flat inference config or a Hugging Face config.json
// (keys nested under text_config or at top level, with HF names; see
// hfKeyNames). Absent fields keep the defaults of DefaultConfig. It is
// strict (internal/jsonx): null for a field, a key given twice and, in a
// flat config, any key that is not a field are errors. A Hugging Face file
// carries keys of its own: those of hfIgnoredKeys are known and unused; any
// other unknown key is an error when it is close to a known name (a
// misspelling), else it is reported by UnusedKeys (compile prints it). It
// does not validate: call Validate.
func ParseConfig(data []byte, source string) (*Config, error) {
	if source == "" {
		source = "config"
	}
	top, keys, err := jsonx.Object(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	c := DefaultConfig()
	c.Source = source
	if !isHF(top) {
		if err := jsonx.Decode(data, c); err != nil {
			return nil, fmt.Errorf("%s: %v", source, err)
		}
		return c, nil
	}
	h := &hfFlattener{flat: map[string]json.RawMessage{}, where: map[string]string{}}
	if err := h.flatten(top, keys); err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	buf, err := json.Marshal(h.flat)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	if err := jsonx.Decode(buf, c); err != nil {
		return nil, fmt.Errorf("%s: %v", source, h.rename(err))
	}
	c.hfUnused = h.unused
	if raw, ok := top["vision_config"]; ok && !jsonx.IsNull(raw) {
		c.hfVisionConfig = true
	}
	return c, nil
}

func isHF(top map[string]json.RawMessage) bool {
	for _, k := range hfMarkers {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// hfIgnoredKeys are keys of Hugging Face configs that the text model does
// not use (generic PretrainedConfig keys, and DeepSeek keys of the HF
// modelling code that the flat config has no field for).
var hfIgnoredKeys = map[string]bool{
	"architectures": true, "model_type": true, "transformers_version": true, "_name_or_path": true, "auto_map": true,
	"torch_dtype": true, "dtype": true, "bos_token_id": true, "eos_token_id": true, "pad_token_id": true,
	"tie_word_embeddings": true, "use_cache": true, "initializer_range": true, "hidden_act": true,
	"attention_bias": true, "attention_dropout": true, "num_key_value_heads": true, "topk_method": true,
	"n_group": true, "topk_group": true, "ep_size": true, "first_k_dense_replace": true, "moe_layer_freq": true,
	"kv_lora_rank": true, "qk_nope_head_dim": true, "v_head_dim": true, "intermediate_size": true, "rope_interleave": true,
	// objects handled on their own
	"text_config": true, "vision_config": true, "rope_scaling": true, "quantization_config": true,
}

// hfRopeIgnored and hfQuantKeys are the other keys of rope_scaling and
// quantization_config that are known.
var (
	hfRopeIgnored = map[string]bool{"rope_type": true, "type": true, "mscale": true, "mscale_all_dim": true}
	hfQuantKeys   = map[string]bool{"quant_method": true, "expert_dtype": true, "activation_scheme": true, "weight_block_size": true, "scale_fmt": true, "fmt": true}
)

// hfFlattener turns an HF config.json into flat ModelArgs keys.
type hfFlattener struct {
	flat   map[string]json.RawMessage
	where  map[string]string // flat key -> the key as written in the file (when it differs)
	unused []string          // unknown keys, not close to a known one
}

// checkKey classifies an unknown key of an HF object: an error when it is
// close to a known name, else it is noted as unused.
func (h *hfFlattener) checkKey(path string, known ...map[string]bool) error {
	_, k, _ := cutLast(path)
	var names []string
	for _, set := range known {
		for n := range set {
			names = append(names, n)
		}
	}
	if near := jsonx.Closest(k, names); near != "" {
		return fmt.Errorf("field %q: unknown field (did you mean %q?)", path, near)
	}
	h.unused = append(h.unused, path)
	return nil
}

func cutLast(path string) (string, string, bool) {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:], true
	}
	return "", path, false
}

// put sets a flat key, refusing two spellings of one field with different values.
func (h *hfFlattener) put(flat, written string, v json.RawMessage) error {
	if old, ok := h.flat[flat]; ok {
		prev := h.where[flat]
		if prev == "" {
			prev = flat
		}
		if prev != written && !bytes.Equal(compact(old), compact(v)) {
			return fmt.Errorf("field %q and field %q name the same setting with different values", prev, written)
		}
	}
	h.flat[flat] = v
	if written != flat {
		h.where[flat] = written
	}
	return nil
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func (h *hfFlattener) flatten(top map[string]json.RawMessage, keys []string) error {
	if err := h.members("", top, keys); err != nil {
		return err
	}
	rope, ropePath := top["rope_scaling"], "rope_scaling"
	if raw, ok := top["text_config"]; ok && !jsonx.IsNull(raw) {
		tc, tkeys, err := objectAt("text_config", raw)
		if err != nil {
			return err
		}
		if err := h.members("text_config.", tc, tkeys); err != nil {
			return err
		}
		if r, ok := tc["rope_scaling"]; ok {
			rope, ropePath = r, "text_config.rope_scaling"
		}
	}
	if rope != nil && !jsonx.IsNull(rope) {
		if err := h.rope(rope, ropePath); err != nil {
			return err
		}
	}
	return h.quant(top["quantization_config"])
}

// members copies the keys of one object (the top level or text_config).
func (h *hfFlattener) members(prefix string, obj map[string]json.RawMessage, keys []string) error {
	fields := jsonx.FieldNames(reflect.TypeFor[Config]()) // the flat format's keys
	for _, k := range keys {
		v := obj[k]
		switch {
		case hfIgnoredKeys[k]:
			// In HF configs "dtype"/"torch_dtype" name the torch dtype (e.g.
			// "bfloat16"), not ModelArgs.dtype, which comes from
			// quantization_config.
		case hfKeyNames[k] != "":
			if err := h.put(hfKeyNames[k], prefix+k, v); err != nil {
				return err
			}
		case k == "expert_dtype":
			return fmt.Errorf("field %q: in a Hugging Face config the expert dtype is quantization_config.expert_dtype", prefix+k)
		case fields[k]:
			if err := h.put(k, prefix+k, v); err != nil {
				return err
			}
		default:
			if err := h.checkKey(prefix+k, fields, hfIgnoredKeys, hfNameSet()); err != nil {
				return err
			}
		}
	}
	return nil
}

func hfNameSet() map[string]bool {
	out := map[string]bool{}
	for k := range hfKeyNames {
		out[k] = true
	}
	return out
}

func (h *hfFlattener) rope(raw json.RawMessage, path string) error {
	rs, keys, err := objectAt(path, raw)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for k := range hfRopeScalingKeys {
		known[k] = true
	}
	for _, k := range keys {
		switch {
		case hfRopeScalingKeys[k] != "":
			if err := h.put(hfRopeScalingKeys[k], path+"."+k, rs[k]); err != nil {
				return err
			}
		case !hfRopeIgnored[k]:
			if err := h.checkKey(path+"."+k, known, hfRopeIgnored); err != nil {
				return err
			}
		}
	}
	return nil
}

// quant sets dtype and expert_dtype from quantization_config; without one
// the checkpoint is unquantised.
func (h *hfFlattener) quant(raw json.RawMessage) error {
	if raw == nil || jsonx.IsNull(raw) {
		h.flat["dtype"] = json.RawMessage(`"bf16"`)
		h.flat["expert_dtype"] = json.RawMessage(`"bf16"`)
		return nil
	}
	qc, keys, err := objectAt("quantization_config", raw)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !hfQuantKeys[k] {
			if err := h.checkKey("quantization_config."+k, hfQuantKeys); err != nil {
				return err
			}
		}
	}
	for from, to := range map[string]string{"quant_method": "dtype", "expert_dtype": "expert_dtype"} {
		if v, ok := qc[from]; ok {
			h.flat[to] = v
			h.where[to] = "quantization_config." + from
		}
	}
	return nil
}

// objectAt is jsonx.Object for the object at path, its errors worded for
// that place.
func objectAt(path string, raw json.RawMessage) (map[string]json.RawMessage, []string, error) {
	m, keys, err := jsonx.Object(raw)
	var fe *jsonx.FieldError
	switch {
	case err == nil:
	case errors.As(err, &fe) && fe.Field == "":
		err = &jsonx.FieldError{Field: path, Msg: strings.Replace(fe.Msg, "top level is", "is", 1)}
	case errors.As(err, &fe):
		err = &jsonx.FieldError{Field: path + "." + fe.Field, Msg: fe.Msg}
	default:
		err = fmt.Errorf("field %q: %v", path, err)
	}
	return m, keys, err
}

// rename puts the key as written in the file into a field error.
func (h *hfFlattener) rename(err error) error {
	var fe *jsonx.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	root, rest, _ := strings.Cut(fe.Field, ".")
	if w := h.where[root]; w != "" {
		if rest != "" {
			w += "." + rest
		}
		return &jsonx.FieldError{Field: w, Msg: fe.Msg}
	}
	return err
}

// UnusedKeys lists the keys of a Hugging Face config that are neither
// fields nor known HF keys (see ParseConfig), in file order.
func (c *Config) UnusedKeys() []string { return c.hfUnused }

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
