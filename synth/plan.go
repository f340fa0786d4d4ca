package synth

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/ds4go/ds4/models/deepseekv4"
)

// kind is how a stored tensor's bytes are generated.
type kind int

const (
	kindBF16   kind = iota // N(mean, std) rounded to bf16
	kindF32                // N(mean, std) in f32
	kindFP8                // e4m3 codes, 32x32 block e8m0 scales in a sibling tensor
	kindFP8Row             // e4m3 codes, per-row per-32 e8m0 scales in a sibling tensor
	kindFP4                // packed e2m1 codes, per-row per-32 e8m0 scales in a sibling tensor
	kindScale              // the scale half of a quantised pair (written with its weight)
)

// tensor is one tensor of the checkpoint.
type tensor struct {
	name   string
	dtype  string
	shape  []int
	kind   kind
	mean   float64
	std    float64
	scale  *tensor // sibling scale tensor of a quantised weight
	shard  int
	offset int64 // of the data, relative to the shard's data area
	seed   uint64
}

func (t *tensor) bytes() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= int64(d)
	}
	switch t.dtype {
	case "BF16":
		return 2 * n
	case "F32":
		return 4 * n
	}
	return n
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func nameSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return splitmix(seed ^ h.Sum64())
}

// plan lists the tensors of the checkpoint (model shards only; the token
// map is reported by the second result: its vocab size, or 0 if absent).
func plan(c *deepseekv4.Config, seed uint64) ([]*tensor, int, error) {
	g, err := deepseekv4.BuildGraph(c, deepseekv4.Prefill)
	if err != nil {
		return nil, 0, err
	}
	var out []*tensor
	tokenMap := 0
	for _, n := range g.Weights() {
		name := n.Attrs.Str("name", "")
		shape := make([]int, len(n.Type.Shape))
		for i, d := range n.Type.Shape {
			if !d.IsConst() {
				return nil, 0, fmt.Errorf("weight %s: symbolic dimension %s", name, d)
			}
			shape[i] = int(d.N)
		}
		format := n.Attrs.Str("format", "")
		if format == "i64" {
			tokenMap = shape[0]
			continue
		}
		names := []string{name}
		if e := int(n.Attrs.Int("experts", 0)); e > 0 {
			shape = shape[1:]
			names = names[:0]
			for i := 0; i < e; i++ {
				names = append(names, strings.ReplaceAll(name, "{e}", fmt.Sprint(i)))
			}
		}
		for _, nm := range names {
			ts, err := declare(nm, format, shape, c)
			if err != nil {
				return nil, 0, err
			}
			for _, t := range ts {
				t.seed = nameSeed(seed, t.name)
			}
			out = append(out, ts...)
		}
	}
	return out, tokenMap, nil
}

func scaleName(name string) string { return strings.TrimSuffix(name, ".weight") + ".scale" }

// declare returns the stored tensor(s) of one weight: the weight and, for
// the quantised formats, its scale tensor.
func declare(name, format string, shape []int, c *deepseekv4.Config) ([]*tensor, error) {
	mean, std := values(name, shape, c)
	t := &tensor{name: name, shape: shape, mean: mean, std: std}
	if format == "fp8" || format == "fp8row" || format == "fp4" {
		if len(shape) != 2 {
			return nil, fmt.Errorf("weight %s: %s format needs a 2-D shape, has %v", name, format, shape)
		}
		out, in := shape[0], shape[1]
		s := &tensor{name: scaleName(name), dtype: "F8_E8M0", kind: kindScale}
		switch format {
		case "fp8":
			t.dtype, t.kind = "F8_E4M3", kindFP8
			s.shape = []int{ceilDiv(out, 32), ceilDiv(in, 32)}
		case "fp8row":
			t.dtype, t.kind = "F8_E4M3", kindFP8Row
			s.shape = []int{out, ceilDiv(in, 32)}
		default:
			if in%32 != 0 {
				return nil, fmt.Errorf("weight %s: fp4 inner dim %d is not a multiple of 32", name, in)
			}
			t.dtype, t.kind = "I8", kindFP4
			t.shape = []int{out, in / 2}
			s.shape = []int{out, in / 32}
		}
		t.scale = s
		return []*tensor{t, s}, nil
	}
	switch format {
	case "bf16":
		t.dtype, t.kind = "BF16", kindBF16
	case "f32":
		t.dtype, t.kind = "F32", kindF32
	default:
		return nil, fmt.Errorf("weight %s: unknown format %q", name, format)
	}
	return []*tensor{t}, nil
}

// values returns the mean and standard deviation of a weight's values:
// matrices N(0, gain/sqrt(in)), the gains taken from the golden tiny
// checkpoint (output projections small so that each layer adds a fraction
// of the stream; expert w1/w3 large so that the SwiGLU clamps fire).
func values(name string, shape []int, c *deepseekv4.Config) (mean, std float64) {
	in := shape[len(shape)-1]
	mat := func(gain float64) (float64, float64) { return 0, gain / math.Sqrt(float64(in)) }
	has := func(s string) bool { return strings.HasSuffix(name, s) }
	switch {
	case name == "embed.weight":
		return 0, 1
	case name == "head.weight":
		return mat(3)
	case has("norm.weight"): // attn_norm, ffn_norm, q/kv/k norm, compressor norm, final norm
		return 1, 0.1
	case has("_fn"): // hc_{attn,ffn}_fn: pre-sigmoid mixes of std ~0.5
		return mat(0.5)
	case has("_base"):
		return 0, 1.2
	case has("_scale") && strings.Contains(name, ".hc_"):
		return 1, 0.2
	case has("attn_sink"):
		return 0, 0.3
	case has("gate.bias"):
		return 0, 0.07
	case has("gate.bias_vl"):
		return 0, 0.04
	case has("q_weight"), has("k_weight"):
		return 1, 0.3
	case strings.Contains(name, ".engram.embed."):
		return 0, 1
	case has("wo_b.weight"):
		return mat(0.45)
	case strings.Contains(name, ".experts.") && has("w2.weight"):
		return mat(0.03)
	case strings.Contains(name, ".shared_experts.") && has("w2.weight"):
		return mat(0.03)
	case strings.Contains(name, ".experts.") && (has("w1.weight") || has("w3.weight")):
		return mat(4.4)
	case has("engram.wkv.weight"):
		return mat(0.5)
	}
	return mat(1)
}
