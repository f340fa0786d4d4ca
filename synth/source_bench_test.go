package synth

import (
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// BenchmarkSourceSlice generates weights of the full-width slice
// (bench/configs/slice.json) the way exec -bench -synthetic does: one
// routed-expert stack (w1 of layer 0: 384 x 2304 x 5120 fp4, 2.4 GB), one
// fp8 projection and the bf16 head, reporting GB/s:
//
//	go test ./synth -run XXX -bench SourceSlice -benchtime 1x
func BenchmarkSourceSlice(b *testing.B) {
	c, err := deepseekv4.LoadConfig(filepath.Join("..", "bench", "configs", "slice.json"))
	if err != nil {
		b.Fatal(err)
	}
	src, err := NewSource(c, 1, Options{})
	if err != nil {
		b.Fatal(err)
	}
	g, err := deepseekv4.BuildGraph(c, deepseekv4.Prefill)
	if err != nil {
		b.Fatal(err)
	}
	pick := map[string]*ir.Node{}
	for _, n := range g.Weights() {
		switch name := n.Attrs.Str("name", ""); name {
		case "layers.0.ffn.experts.{e}.w1.weight", "layers.0.attn.wq_b.weight", "head.weight":
			pick[name] = n
		}
	}
	for name, n := range pick {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(src.StoredBytes(n))
			for range b.N {
				if _, err := src.Weight(n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
