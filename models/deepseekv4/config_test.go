package deepseekv4

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseReleaseConfig(t *testing.T) {
	c := loadRelease(t)
	if c.Dim != 5120 || c.NLayers != 40 || c.NMTPLayers != 3 || c.NHeads != 64 || c.HeadDim != 512 ||
		c.RopeHeadDim != 64 || c.WindowSize != 128 || c.OriginalSeqLen != 65536 || c.RopeFactor != 16 ||
		c.CandidateSourceLayer != 20 || c.EngramCompressedVocabSize != 99092 || len(c.CompressRatios) != 43 {
		t.Fatalf("unexpected release config: %+v", c)
	}
	// Defaults for fields absent from the file.
	if c.GateTemp != 1 || !c.NormTopKProb || c.MaxSeqLen != 4096 || c.MaxBatchSize != 4 {
		t.Errorf("defaults not applied: gate_temp %g norm_topk_prob %v max_seq_len %d", c.GateTemp, c.NormTopKProb, c.MaxSeqLen)
	}
	if c.VisionMaxWHRatio != nil {
		t.Errorf("vision_max_wh_ratio: got %v, want nil", *c.VisionMaxWHRatio)
	}
	ign := c.IgnoredParts()
	if len(ign) != 2 || !strings.Contains(ign[0], "DSpark") || !strings.Contains(ign[1], "vision") {
		t.Errorf("IgnoredParts = %q", ign)
	}
	t.Log(c)
}

func TestParseTinyConfig(t *testing.T) {
	c := loadTiny(t)
	if c.Dim != 128 || c.NLayers != 8 || c.NMTPLayers != 0 || c.EngramNHeads != 2 || c.Dtype != "fp8" || c.ExpertDtype != "fp4" {
		t.Fatalf("unexpected tiny config: %+v", c)
	}
	if ign := c.IgnoredParts(); len(ign) != 0 {
		t.Errorf("IgnoredParts = %q, want none", ign)
	}
}

func TestParseHFConfig(t *testing.T) {
	flat := loadRelease(t)
	hf, err := LoadConfig("testdata/configs/hf-deepseek-v41-flash.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.Validate(); err != nil {
		t.Fatal(err)
	}
	if hf.MaxPositionEmbeddings != 1048576 {
		t.Errorf("max_position_embeddings = %d", hf.MaxPositionEmbeddings)
	}
	// Vision fields live in vision_config in HF and are not mapped; the text
	// model must be identical.
	if ign := hf.IgnoredParts(); len(ign) != 2 || !strings.Contains(ign[1], "vision_config") {
		t.Errorf("IgnoredParts = %q", ign)
	}
	a, b := *flat, *hf
	for _, x := range []*Config{&a, &b} {
		x.Source, x.MaxPositionEmbeddings, x.hfVisionConfig = "", 0, false
		x.VisionNLayers, x.VisionDim, x.VisionNHeads, x.VisionInterDim, x.VisionPatchSize = 0, 0, 0, 0, 0
		x.VisionDownsampleRatio, x.VisionMaxNToken, x.VisionMinPixels, x.VisionRopeTheta = 0, 0, 0, 0
	}
	if !reflect.DeepEqual(a, b) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		t.Fatalf("HF config differs from flat config:\nflat %s\nhf   %s", ja, jb)
	}
}

func TestParseHFTopLevelNoQuant(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type":"deepseek_v4","hidden_size":256,"num_hidden_layers":3,
		"num_nextn_predict_layers":0,"compress_ratios":[0,0,0],"kv_source_layer_ids":[],"index_source_layer_ids":[],
		"rope_scaling":{"factor":8,"original_max_position_embeddings":1024},"dtype":"bfloat16","unknown_key":{"x":1}}`), "hf.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Dim != 256 || c.NLayers != 3 || c.RopeFactor != 8 || c.OriginalSeqLen != 1024 || c.Dtype != "bf16" || c.ExpertDtype != "bf16" {
		t.Fatalf("got %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"dim": "big"}`, `x.json: field "dim": want an integer, got string`},
		{`{"compress_ratios": [0, "a"]}`, `x.json: field "compress_ratios": want an integer, got string`},
		{`{"route_scale": true}`, `x.json: field "route_scale": want a number, got true/false`},
		{`{"dim": 12`, `x.json: invalid JSON`},
		{`[1,2]`, `x.json: top level is a list, want an object`},
		{`{"text_config": {"hidden_size": "x"}}`, `x.json: field "text_config.hidden_size": want an integer, got string`},
		{`{"text_config": 3}`, `x.json: field "text_config": is a number, want an object`},
		// Silently accepted before: a null became the default, a misspelt
		// key was dropped, a second copy of a key won.
		{`{"dim": null}`, `x.json: field "dim": null, want an integer`},
		{`{"dimm": 128}`, `x.json: field "dimm": unknown field (did you mean "dim"?)`},
		{`{"Dim": 128}`, `x.json: field "Dim": unknown field (did you mean "dim"?)`},
		{`{"dim": 128, "dim": 256}`, `x.json: field "dim": given twice`},
		{`{"dim": 128} x`, `x.json: invalid JSON at byte`},
		{`{"hc_sinkhorn_iters": 1e12}`, `x.json: field "hc_sinkhorn_iters": want an integer (digits only`},
		{`{"vocab_size": 9223372036854775808}`, `x.json: field "vocab_size": want an integer (digits only`},
		{`{"model_type": "deepseek_v4", "text_config": {"hidden_size": null}}`, `x.json: field "text_config.hidden_size": null, want an integer`},
		{`{"model_type": "deepseek_v4", "hiden_size": 128}`, `x.json: field "hiden_size": unknown field (did you mean "hidden_size"?)`},
		{`{"model_type": "deepseek_v4", "rope_scaling": {"factr": 4}}`, `x.json: field "rope_scaling.factr": unknown field (did you mean "factor"?)`},
		{`{"model_type": "deepseek_v4", "quantization_config": {"quant_methd": "fp8"}}`, `x.json: field "quantization_config.quant_methd": unknown field (did you mean "quant_method"?)`},
		{`{"model_type": "deepseek_v4", "hidden_size": 128, "dim": 256}`, `x.json: field "hidden_size" and field "dim" name the same setting with different values`},
		{`{"model_type": "deepseek_v4", "expert_dtype": "fp4"}`, `x.json: field "expert_dtype": in a Hugging Face config the expert dtype is quantization_config.expert_dtype`},
	} {
		_, err := ParseConfig([]byte(tc.json), "x.json")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseConfig(%s): got %v, want prefix %q", tc.json, err, tc.want)
		}
	}
}

// An HF config may carry keys this code does not know: unless close to a
// known name they are listed by UnusedKeys (compile prints them), and the
// known HF keys are not.
func TestParseConfigHFUnusedKeys(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type": "deepseek_v4", "use_cache": true, "some_future_key": 1, "text_config": {"another_new_setting": 2}}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.UnusedKeys(), " "); got != "some_future_key text_config.another_new_setting" {
		t.Errorf("UnusedKeys = %q", got)
	}
}

func TestLoadConfigMissing(t *testing.T) {
	if _, err := LoadConfig("testdata/configs/nope.json"); err == nil {
		t.Fatal("want error")
	}
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"ratios length", func(c *Config) { c.CompressRatios = c.CompressRatios[:42] }, "compress_ratios: has 42 entries, want n_layers+n_mtp_layers = 43"},
		{"kv source ratio 0", func(c *Config) { c.KVSourceLayers = []int{1, 2, 8, 14, 20} }, "kv_source_layers: layer 1 has compress ratio 0"},
		{"index source ratio 0", func(c *Config) { c.IndexSourceLayers = append(c.IndexSourceLayers, 0) }, "index_source_layers: layer 0 has compress ratio 0"},
		{"kv source out of range", func(c *Config) { c.KVSourceLayers = []int{2, 8, 14, 20, 41} }, "kv_source_layers: layer 41 out of range 0..39"},
		{"index source out of range", func(c *Config) { c.IndexSourceLayers = []int{2, 8, 14, 20, -1} }, "index_source_layers: layer -1 out of range"},
		{"head_dim", func(c *Config) { c.HeadDim = 500 }, "head_dim: is 500, want a multiple of 32"},
		{"dim", func(c *Config) { c.Dim = 5000 }, "dim: is 5000, want a multiple of 32"},
		{"moe_inter_dim", func(c *Config) { c.MoEInterDim = 2300 }, "moe_inter_dim: is 2300, want a multiple of 32"},
		{"q_lora_rank", func(c *Config) { c.QLoraRank = 1000 }, "q_lora_rank: is 1000, want a multiple of 32"},
		{"index_head_dim", func(c *Config) { c.IndexHeadDim = 100 }, "index_head_dim: is 100, want a multiple of 32"},
		{"rope odd", func(c *Config) { c.RopeHeadDim = 63 }, "rope_head_dim: is 63, want an even number"},
		{"rope > head_dim", func(c *Config) { c.HeadDim = 32; c.RopeHeadDim = 64 }, "rope_head_dim: is 64, want <= head_dim = 32"},
		{"rope > index_head_dim", func(c *Config) { c.IndexHeadDim = 32 }, "rope_head_dim: is 64, want <= index_head_dim = 32"},
		{"activated > routed", func(c *Config) { c.NActivatedExperts = 385 }, "n_activated_experts: is 385, want 1..n_routed_experts = 384"},
		{"activated 0", func(c *Config) { c.NActivatedExperts = 0 }, "n_activated_experts: is 0"},
		{"shared experts", func(c *Config) { c.NSharedExperts = 2 }, "n_shared_experts: is 2, want 1"},
		{"score func", func(c *Config) { c.ScoreFunc = "relu" }, `score_func: unknown value "relu"`},
		{"dtype", func(c *Config) { c.Dtype = "int8" }, `dtype: unknown value "int8"`},
		{"expert dtype", func(c *Config) { c.ExpertDtype = "fp2" }, `expert_dtype: unknown value "fp2"`},
		{"engram lengths", func(c *Config) { c.EngramNumEmbeddings = c.EngramNumEmbeddings[:1] }, "engram_num_embeddings: has 1 entries, want len(engram_layer_ids) = 2"},
		{"engram sums", func(c *Config) { c.EngramNumEmbeddings[1]++ }, "engram_num_embeddings: entry 1 (layer 14) is 384016683, want the sum of its primes = 384016682"},
		{"o_groups", func(c *Config) { c.OGroups = 6 }, "o_groups: n_heads = 64 is not divisible by o_groups = 6"},
		{"vocab", func(c *Config) { c.VocabSize = 0 }, "vocab_size: is 0, want > 0"},
		{"reuse without kv source", func(c *Config) { c.KVSourceLayers = []int{8, 14, 20} }, "compress_ratios: layer 2 (ratio 2, reindex) has no earlier kv source"},
		{"reuse reads other ratio", func(c *Config) { c.KVSourceLayers = []int{2, 8, 14} }, "kv_source_layers: layer 20 (ratio 1, reindex) would read compressed KV of layer 14, which has ratio 2"},
		{"reuse without index source", func(c *Config) { c.IndexSourceLayers = []int{8, 14, 20, 24, 28, 32, 36}; c.CandidateSourceLayer = 20 }, "index_source_layers: layer 2 (ratio 2, full) has no earlier index source"},
		{"kv source with top-k of other ratio", func(c *Config) {
			c.KVSourceLayers = []int{2, 8, 14, 20}
			c.IndexSourceLayers = []int{2, 8, 14, 21, 24}
			c.CandidateSourceLayer = -1
		}, "index_source_layers: layer 20 (ratio 1, full) would use the top-k of layer 14, which has ratio 2"},
		{"candidate not index source", func(c *Config) { c.CandidateSourceLayer = 21 }, "candidate_source_layer: layer 21 is not an index source"},
		{"candidate out of range", func(c *Config) { c.CandidateSourceLayer = 40 }, "candidate_source_layer: layer 40 out of range"},
		{"hc_mult", func(c *Config) { c.HCMult = 0 }, "hc_mult: is 0, want > 0"},
		{"window", func(c *Config) { c.WindowSize = 0 }, "window_size: is 0, want > 0"},
		{"sinkhorn", func(c *Config) { c.HCSinkhornIters = -1 }, "hc_sinkhorn_iters: is -1, want > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadRelease(t)
			tc.edit(c)
			err := c.Validate()
			want := releaseCfgPath + ": " + tc.want
			if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v\nwant prefix %q", err, want)
			}
		})
	}
}

func TestValidateReindexNeedsOwner(t *testing.T) {
	c := loadTiny(t)
	// Layer 5 stays a kv source but is no longer an index source, so layer 6
	// (an index source) would score the ratio-2 keys of layer 2.
	c.IndexSourceLayers = []int{2, 6}
	c.CandidateSourceLayer = -1
	err := c.Validate()
	want := "../../testdata/tiny/config.json: index_source_layers: layer 5 (ratio 1, full) would use the top-k of layer 2, which has ratio 2"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestHCMultNotFour(t *testing.T) {
	c := loadTiny(t)
	c.HCMult = 2
	if err := c.Validate(); err != nil {
		t.Fatalf("hc_mult 2 should be accepted: %v", err)
	}
}

// Every config shipped in the repository parses under the strict rules
// (no unknown or misspelt key, no null) and validates.
func TestRepoConfigsStrict(t *testing.T) {
	files, _ := filepath.Glob("../../bench/configs/*.json")
	files = append(files, tinyDir+"/config.json", "../../testdata/unseen6/config.json", releaseCfgPath, "testdata/configs/hf-deepseek-v41-flash.json")
	for _, f := range files {
		c, err := LoadConfig(f)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			t.Errorf("%v", err)
		}
		if u := c.UnusedKeys(); err == nil && len(u) > 0 {
			t.Errorf("%s: unused keys %v", f, u)
		}
	}
}
