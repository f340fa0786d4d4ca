package deepseekv4

import (
	"os"
	"testing"

	"github.com/ds4go/ds4/ir"
)

// fuzzSmall reports whether a validated config is small enough to build in a
// fuzz iteration (the graph is built without weights, but its size grows
// with layers, experts and the Engram tables).
func fuzzSmall(c *Config) bool {
	if c.NLayers+c.NMTPLayers > 8 || c.NRoutedExperts > 64 || c.NHeads > 64 || c.IndexNHeads > 64 ||
		c.Dim > 4096 || c.VocabSize > 1<<20 || c.HCMult > 8 || c.HCSinkhornIters > 64 ||
		c.EngramMaxNgramSize > 8 || c.EngramNHeads > 16 || len(c.EngramLayerIDs) > 8 ||
		c.EngramVocabSize > 1<<24 || c.EngramCompressedVocabSize > 1<<24 {
		return false
	}
	for _, n := range c.EngramNumEmbeddings {
		if n > 1<<24 {
			return false
		}
	}
	return true
}

// FuzzParseConfig feeds arbitrary bytes (flat and Hugging Face configs) to
// ParseConfig and Validate; a config that validates and is small must build
// into a module that verifies, without panicking.
func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{tinyDir + "/config.json", releaseCfgPath, "testdata/configs/hf-deepseek-v41-flash.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model_type":"deepseek_v4","hidden_size":256,"num_hidden_layers":3}`))
	f.Add([]byte(`{"text_config":{"hidden_size":128,"rope_scaling":{"factor":4}},"quantization_config":{"quant_method":"fp8"}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"dim":-1,"compress_ratios":[0,0,0,0,0,0]}`))
	// The strict rules: null, misspelt and duplicate keys, values past a bound.
	f.Add([]byte(`{"dim":null,"dimm":1,"dim":2}`))
	f.Add([]byte(`{"model_type":"x","text_config":{"hidden_size":null,"hiden_size":1,"new_key":2},"rope_scaling":{"factr":1}}`))
	f.Add([]byte(`{"n_layers":100000,"hc_sinkhorn_iters":1e12,"vocab_size":9223372036854775807}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.json")
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			return
		}
		_ = c.IgnoredParts()
		_ = c.Fingerprint()
		if !fuzzSmall(c) {
			return
		}
		m, err := BuildModule(c)
		if err != nil {
			t.Fatalf("config validates but does not build: %v", err)
		}
		if err := ir.VerifyModule(m); err != nil {
			t.Fatalf("config validates but its module does not verify: %v", err)
		}
	})
}
