package synth

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// A Source generates, tensor by tensor, the bytes Write puts in the
// checkpoint for the same config and seed (so -synthetic runs the weights
// of a synth checkpoint), and the same bytes on every run.
func TestSourceMatchesWrite(t *testing.T) {
	c, err := deepseekv4.LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ck")
	if err := Write(dir, c, 7, Options{ShardBytes: 1 << 16}); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	tm, err := safetensors.Open(filepath.Join(dir, TokenMapFile))
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	src, err := NewSource(c, 7, Options{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := NewSource(c, 7, Options{Workers: 1})
	g, err := deepseekv4.BuildGraph(c, deepseekv4.Prefill)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range g.Weights() {
		hw, err := src.Weight(n)
		if err != nil {
			t.Fatal(err)
		}
		hw2, _ := again.Weight(n)
		parts, parts2 := hw.Parts, hw2.Parts
		if parts == nil {
			parts, parts2 = append(parts, hw), append(parts2, hw2)
		}
		var got int64
		for i, p := range parts {
			got += int64(len(p.Data) + len(p.Scale))
			if !bytes.Equal(p.Data, parts2[i].Data) || !bytes.Equal(p.Scale, parts2[i].Scale) {
				t.Errorf("%s: two sources with the same seed differ", p.Name)
			}
			var want *safetensors.Tensor
			var ok bool
			if p.Format == "i64" {
				want, ok = tm.Get(p.Name)
			} else {
				want, ok = set.Get(p.Name)
			}
			if !ok {
				t.Fatalf("%s: not in the written checkpoint", p.Name)
			}
			if !bytes.Equal(p.Data, want.Data) || p.Stored != want.DType {
				t.Errorf("%s: generated %s bytes differ from the written %s", p.Name, p.Stored, want.DType)
			}
			if p.Scale != nil {
				ws, _ := set.Get(scaleName(p.Name))
				if ws == nil || !bytes.Equal(p.Scale, ws.Data) {
					t.Errorf("%s: generated scales differ from the written ones", p.Name)
				}
			}
		}
		if sb := src.StoredBytes(n); sb != got {
			t.Errorf("%s: StoredBytes %d, generated %d", hw.Name, sb, got)
		}
		total += got
	}
	if total != src.TotalBytes() {
		t.Errorf("generated %d bytes, TotalBytes says %d", total, src.TotalBytes())
	}
	if b, _ := src.Generated(); b != total {
		t.Errorf("Generated reports %d bytes, want %d", b, total)
	}
	other, _ := NewSource(c, 8, Options{})
	n := g.Weights()[0]
	a, _ := src.Weight(n)
	b, _ := other.Weight(n)
	if bytes.Equal(a.Data, b.Data) {
		t.Errorf("%s: seeds 7 and 8 generate the same bytes", a.Name)
	}
}

// The benchmark slice is planned, not generated (55 GB): its size and an
// expert stack's, from the shapes and formats alone.
func TestSourceSliceSizes(t *testing.T) {
	c, err := deepseekv4.LoadConfig(filepath.Join("..", "bench", "configs", "slice.json"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(c, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := src.TotalBytes(); got != 54_841_952_024 {
		t.Errorf("slice TotalBytes %d, want 54841952024", got)
	}
	g, err := deepseekv4.BuildGraph(c, deepseekv4.Prefill)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Weights() {
		if n.Attrs.Str("name", "") == "layers.0.ffn.experts.{e}.w1.weight" {
			// 384 experts x 2304 rows x (5120/2 code bytes + 5120/32 scales)
			if got, want := src.StoredBytes(n), int64(384*2304*(2560+160)); got != want {
				t.Errorf("expert stack w1: %d bytes, want %d", got, want)
			}
		}
	}
	if b, _ := src.Generated(); b != 0 {
		t.Errorf("planning generated %d bytes", b)
	}
}
