package synth

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/models/deepseekv4"
)

const tinyDir = "../testdata/tiny"

// The synthetic tiny checkpoint holds exactly the tensors of the golden one
// (names, dtypes, shapes), binds in the engine and runs.
func TestTinyMatchesGoldenLayout(t *testing.T) {
	c, err := deepseekv4.LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rep, err := Generate(dir, c, 7, Options{ShardBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.Shards < 2 {
		t.Errorf("%d shards, want several with a 1 MiB limit", rep.Shards)
	}
	gold, err := safetensors.OpenDir(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer gold.Close()
	got, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	used := map[string]bool{}
	for _, n := range got.Names() {
		used[n] = true
		g, _ := got.Get(n)
		w, ok := gold.Get(n)
		if !ok {
			t.Errorf("%s: not in the golden checkpoint", n)
			continue
		}
		if g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) {
			t.Errorf("%s: %s%v, golden %s%v", n, g.DType, g.Shape, w.DType, w.Shape)
		}
		if g.DType == "F8_E8M0" && bytes.IndexByte(g.Data, 0xff) >= 0 {
			t.Errorf("%s: NaN scale", n)
		}
	}
	for _, n := range gold.Names() {
		if !used[n] {
			t.Errorf("%s: missing", n)
		}
	}
	tm, err := safetensors.Open(filepath.Join(dir, TokenMapFile))
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	v, _ := mustGet(t, tm, "token_map").Int64s()
	for _, x := range v {
		if x < 0 || x >= c.EngramCompressedVocabSize {
			t.Fatalf("token_map value %d out of range", x)
		}
	}
	if _, err := deepseekv4.LoadConfig(dir); err != nil {
		t.Fatal(err)
	}

	s := openSession(t, dir, c)
	lg, err := s.Prefill([][]int64{{1, 5, 9, 200, 33, 7}})
	if err != nil {
		t.Fatal(err)
	}
	var sum, sq float64
	for _, x := range lg.Data {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatal("non-finite logit")
		}
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	n := float64(len(lg.Data))
	if std := math.Sqrt(sq/n - (sum/n)*(sum/n)); std < 0.1 || std > 100 {
		t.Errorf("logit std %g", std)
	}
}

// Weights dequantise to N(0, gain/sqrt(in)) and the scales are the
// smallest powers of two that fit.
func TestQuantisedValues(t *testing.T) {
	c, err := deepseekv4.LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Write(dir, c, 3, Options{}); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	// fp8 32x32 blocks.
	w := mustGetSet(t, set, "layers.0.attn.wq_a.weight")
	sc := mustGetSet(t, set, "layers.0.attn.wq_a.scale")
	out, in := w.Shape[0], w.Shape[1]
	var sq float64
	for bi := 0; bi < out/32; bi++ {
		for bj := 0; bj < in/32; bj++ {
			s := numfmt.E8M0ToF32(sc.Data[bi*(in/32)+bj])
			var m float32
			for r := bi * 32; r < bi*32+32; r++ {
				for k := bj * 32; k < bj*32+32; k++ {
					v := numfmt.E4M3ToF32(w.Data[r*in+k])
					m = max(m, float32(math.Abs(float64(v))))
					sq += float64(v*s) * float64(v*s)
				}
			}
			if m > 448 || m <= 224 {
				t.Fatalf("block %d,%d: max code %g, want in (224, 448]", bi, bj, m)
			}
		}
	}
	rms := math.Sqrt(sq / float64(out*in))
	if want := 1 / math.Sqrt(float64(in)); math.Abs(rms/want-1) > 0.05 {
		t.Errorf("wq_a rms %g, want %g", rms, want)
	}
	// fp4 rows.
	w = mustGetSet(t, set, "layers.0.ffn.experts.3.w2.weight")
	sc = mustGetSet(t, set, "layers.0.ffn.experts.3.w2.scale")
	rows, kb := sc.Shape[0], sc.Shape[1]
	for r := 0; r < rows; r++ {
		for b := 0; b < kb; b++ {
			var m float32
			for k := b * 16; k < b*16+16; k++ {
				x := w.Data[r*w.Shape[1]+k]
				m = max(m, abs32(numfmt.E2M1ToF32(x&15)), abs32(numfmt.E2M1ToF32(x>>4)))
			}
			if m > 6 || m < 3 {
				t.Fatalf("fp4 row %d block %d: max code %g", r, b, m)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	c, err := deepseekv4.LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	a, b := t.TempDir(), t.TempDir()
	if err := Write(a, c, 11, Options{Workers: 1}); err != nil {
		t.Fatal(err)
	}
	if err := Write(b, c, 11, Options{Workers: 3}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(a)
	for _, e := range ents {
		x, _ := os.ReadFile(filepath.Join(a, e.Name()))
		y, _ := os.ReadFile(filepath.Join(b, e.Name()))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between runs", e.Name())
		}
	}
}

// The benchmark config compiles (its checkpoint is ~6 GB: not generated).
func TestMiniConfig(t *testing.T) {
	c, err := deepseekv4.LoadConfig("../bench/configs/mini.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deepseekv4.BuildModule(c); err != nil {
		t.Fatal(err)
	}
	ts, _, err := plan(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, x := range ts {
		n += x.bytes()
	}
	t.Logf("%s: %d tensors, %.2f GB", c, len(ts), float64(n)/1e9)
}

// With the golden recipe's gains the residual stream stays bounded over
// many layers: a 24-layer model of tiny width, the released layer pattern.
func TestDeepStreamBounded(t *testing.T) {
	c, err := deepseekv4.LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	c.NLayers = 24
	c.CompressRatios = make([]int, 24)
	for l := 2; l < 24; l++ {
		c.CompressRatios[l] = 1
		if l < 12 {
			c.CompressRatios[l] = 2
		}
	}
	c.KVSourceLayers, c.IndexSourceLayers, c.CandidateSourceLayer = []int{2, 12}, []int{2, 12, 16, 20}, 12
	c.EngramLayerIDs = []int{1, 14}
	lay, err := deepseekv4.EngramLayout(c)
	if err != nil {
		t.Fatal(err)
	}
	c.EngramNumEmbeddings = []int64{lay[0].Rows, lay[1].Rows}
	dir := t.TempDir()
	if err := Write(dir, c, 5, Options{}); err != nil {
		t.Fatal(err)
	}
	s := openSession(t, dir, c)
	s.Tracer = engine.NewTracer(true, nil)
	if _, err := s.Prefill([][]int64{{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}}); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "trace.safetensors")
	if err := s.Tracer.Write(trace); err != nil {
		t.Fatal(err)
	}
	tf, err := safetensors.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	rms := func(name string) float64 {
		v, err := mustGet(t, tf, name).Float32s()
		if err != nil {
			t.Fatal(err)
		}
		var sq float64
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s: non-finite", name)
			}
			sq += float64(x) * float64(x)
		}
		return math.Sqrt(sq / float64(len(v)))
	}
	first, last := rms("prefill.L0.stream_out"), rms("prefill.L23.stream_out")
	t.Logf("stream rms: embed %.3f, L0 %.3f, L11 %.3f, L23 %.3f", rms("prefill.embed"), first, rms("prefill.L11.stream_out"), last)
	if last > 20*first || last < first/20 {
		t.Errorf("stream rms %.3g after layer 23 vs %.3g after layer 0", last, first)
	}
}

func TestErrors(t *testing.T) {
	c, _ := deepseekv4.LoadConfig(tinyDir)
	c.Dim = 100
	if err := Write(t.TempDir(), c, 1, Options{}); err == nil {
		t.Error("invalid config accepted")
	}
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func mustGet(t *testing.T, f *safetensors.File, name string) *safetensors.Tensor {
	t.Helper()
	x, ok := f.Get(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return x
}

func mustGetSet(t *testing.T, s *safetensors.Set, name string) *safetensors.Tensor {
	t.Helper()
	x, ok := s.Get(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return x
}

func BenchmarkGen(b *testing.B) {
	for _, k := range []struct {
		name   string
		format string
		shape  []int
	}{{"fp4", "fp4", []int{1536, 2048}}, {"fp8", "fp8", []int{2048, 2048}}, {"bf16", "bf16", []int{1024, 2048}}} {
		b.Run(k.name, func(b *testing.B) {
			ts, err := declare("x.weight", k.format, k.shape, deepseekv4.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			j := job{t: ts[0], r0: 0, r1: k.shape[0]}
			b.SetBytes(ts[0].bytes())
			var s scratch
			for b.Loop() {
				gen(j, &s)
			}
		})
	}
}

// openSession builds c's module, opens the checkpoint in dir on the CPU
// backend (closed when the test ends) and starts a 1×16 session.
func openSession(t *testing.T, dir string, c *deepseekv4.Config) *engine.Session {
	t.Helper()
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	model, err := engine.Open(m, dir, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	s, err := model.NewSession(engine.Options{Batch: 1, MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
