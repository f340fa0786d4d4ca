package deepseekv4

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// releaseWith is the released config with keys set to values (key, value,
// key, value, ...).
func releaseWith(t *testing.T, kv ...any) []byte {
	t.Helper()
	b, err := os.ReadFile(releaseCfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	out, _ := json.Marshal(m)
	return out
}

// Every bound refuses the value one above it, names the field, and does so
// at once (before anything is built from the sizes); the released config
// itself sits inside every bound (loadRelease validates it).
func TestConfigBounds(t *testing.T) {
	rel := loadRelease(t)
	for _, b := range rel.bounds() {
		t.Run(b.name, func(t *testing.T) {
			if b.v > b.max {
				t.Fatalf("the release's %s = %d is above the bound %d", b.name, b.v, b.max)
			}
			start := time.Now()
			c, err := ParseConfig(releaseWith(t, b.name, b.max+1), "r.json")
			if err == nil {
				err = c.Validate()
			}
			want := "r.json: " + b.name + ": is "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "want <=") {
				t.Errorf("got %v, want prefix %q", err, want)
			}
			// 1 s: a generous wall bound on 2 shared cores; refusing takes
			// microseconds, the slips it guards against took minutes.
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// The examples of issue 11: each grew the builder until memory ran out or
// wrapped int64 in the accounting.
func TestConfigBoundsIssueExamples(t *testing.T) {
	for _, tc := range []struct {
		key  string
		v    any
		want string
		more []any
	}{
		{"hc_sinkhorn_iters", json.Number("1000000000000"), "hc_sinkhorn_iters: is 1000000000000, want <= 100", nil},
		{"hc_sinkhorn_iters", json.Number("1e12"), `field "hc_sinkhorn_iters": want an integer`, nil},
		{"n_layers", 100000, "n_layers: is 100000, want <= 256", nil},
		{"vocab_size", json.Number("9223372036854775807"), "vocab_size: is 9223372036854775807, want <= 4194304", nil},
		{"engram_vocab_size", json.Number("4294967296"), "engram_vocab_size: (engram_max_ngram_size-1) x engram_n_heads x engram_vocab_size = 4123168604160 table rows", []any{"engram_n_heads", 64, "engram_max_ngram_size", 16}},
		{"engram_compressed_vocab_size", 200000, "engram_compressed_vocab_size: is 200000, want <= vocab_size = 129280", nil},
		{"compress_ratios", []int{5000}, "compress_ratios: entry 0 is 5000", nil},
		{"route_scale", 1e300, "route_scale: is 1e+300, want at most 3.4028234663852886e+38 in magnitude (the kernels compute in float32)", nil},
		{"rope_factor", 0, "rope_factor: is 0, want > 0", nil},
	} {
		start := time.Now()
		c, err := ParseConfig(releaseWith(t, append([]any{tc.key, tc.v}, tc.more...)...), "r.json")
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s = %v: got %v, want %q", tc.key, tc.v, err, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s = %v: took %v", tc.key, tc.v, d)
		}
	}
}

// The accounting saturates instead of wrapping.
func TestAccountingSaturates(t *testing.T) {
	c := &Component{Params: 1 << 62, Instances: 4}
	if got := c.Total(); got != math.MaxInt64 {
		t.Errorf("Total = %d, want MaxInt64", got)
	}
	if s := group3(c.Total()); !strings.Contains(s, "overflow") {
		t.Errorf("group3(MaxInt64) = %q", s)
	}
}
