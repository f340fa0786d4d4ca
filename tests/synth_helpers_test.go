package tests

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/synth"
)

// unseenBase returns the golden tiny config, to be modified by a test.
func unseenBase(t testing.TB) *deepseekv4.Config {
	t.Helper()
	c, err := deepseekv4.LoadConfig(tinyDir())
	if err != nil {
		t.Fatal(err)
	}
	c.Source = "unseen"
	return c
}

// unseenEngram sets the Engram layers of c and the table sizes they need.
func unseenEngram(t testing.TB, c *deepseekv4.Config, layers ...int) {
	t.Helper()
	c.EngramLayerIDs = layers
	c.EngramNumEmbeddings = nil
	if len(layers) == 0 {
		return
	}
	lay, err := deepseekv4.EngramLayout(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lay {
		c.EngramNumEmbeddings = append(c.EngramNumEmbeddings, l.Rows)
	}
}

// unseenModel writes a random checkpoint for c into a temp dir and opens it
// on the cpu backend.
func unseenModel(t testing.TB, c *deepseekv4.Config, seed uint64) *engine.Model {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(dir, c, seed, synth.Options{ShardBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	return unseenOpen(t, m, dir, "cpu")
}

// unseenOpen opens module m on the checkpoint in dir on a backend.
func unseenOpen(t testing.TB, m *ir.Module, dir, backend string) *engine.Model {
	t.Helper()
	model, err := engine.Open(m, dir, backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	return model
}

// unseenTokens returns b rows of n ids in [0, vocab), deterministic in seed.
func unseenTokens(b, n, vocab int, seed uint64) [][]int64 {
	x := seed*0x9e3779b97f4a7c15 + 1
	out := make([][]int64, b)
	for i := range out {
		out[i] = make([]int64, n)
		for j := range out[i] {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			out[i][j] = int64(x % uint64(vocab))
		}
	}
	return out
}

// unseenRow is the logits of row b, position s of a call.
func unseenRow(l *engine.Logits, b, s int) []float32 {
	return l.Data[(b*l.S+s)*l.V : (b*l.S+s+1)*l.V]
}

// unseenRel returns ||a-b|| / ||b|| and max|a-b|.
func unseenRel(a, b []float32) (rel, maxAbs float64) {
	var d, n float64
	for i := range a {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
		maxAbs = math.Max(maxAbs, math.Abs(e))
	}
	if n == 0 {
		if d == 0 {
			return 0, 0
		}
		return math.Inf(1), maxAbs
	}
	return math.Sqrt(d / n), maxAbs
}

// unseenSane fails unless every logit is finite and each row has a spread
// (standard deviation over the vocabulary) in [1e-2, 1e3].
func unseenSane(t *testing.T, what string, l *engine.Logits) {
	t.Helper()
	for b := 0; b < l.B; b++ {
		for s := 0; s < l.S; s++ {
			row := unseenRow(l, b, s)
			var sum, sq float64
			for _, x := range row {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("%s: row %d position %d: non-finite logit %v", what, b, s, x)
				}
				sum += float64(x)
				sq += float64(x) * float64(x)
			}
			n := float64(len(row))
			std := math.Sqrt(math.Max(sq/n-(sum/n)*(sum/n), 0))
			if std < 1e-2 || std > 1e3 {
				t.Fatalf("%s: row %d position %d: logit std %g out of [1e-2, 1e3]", what, b, s, std)
			}
		}
	}
}

// unseenState is a persistent state tensor of a session, with what tells
// which part of it holds live data after P tokens.
type unseenState struct {
	name, kind string
	ratio      int // compression ratio of the layer (compressed caches)
}

// unseenStates lists the states of the model with their kinds.
func unseenStates(m *engine.Model, c *deepseekv4.Config) []unseenState {
	var out []unseenState
	for _, n := range m.Module.Graph("prefill").Nodes {
		if n.Op != "state" {
			continue
		}
		st := unseenState{name: n.Attrs.Str("name", ""), kind: n.Attrs.Str("kind", "")}
		var l int
		if _, err := fmt.Sscanf(st.name, "L%d.", &l); err == nil && l < len(c.CompressRatios) {
			st.ratio = c.CompressRatios[l]
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// live returns how many leading entries of axis 1 hold data after P tokens:
// ring slots written, compressed rows of complete groups, slots of the
// compressor's pending group. Entries past it are stale or never written
// and may differ between a prefill and decode steps.
func (st unseenState) live(n1, P int) int {
	switch st.kind {
	case "window":
		return min(P, n1)
	case "compressor_kv", "compressor_score":
		return P % n1
	case "compress_kv", "index_k":
		return min(P/st.ratio, n1)
	}
	return n1
}

// unseenStateDiff compares the live part of a state tensor of two sessions
// at P tokens: rel L2 over the finite entries (equal infinities match).
func unseenStateDiff(st unseenState, a, b *backends.Tensor, P int) (rel, maxAbs float64, err error) {
	if fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
		return 0, 0, fmt.Errorf("shapes %v and %v", a.Shape, b.Shape)
	}
	outer, n1, inner := a.Shape[0], 1, 1
	if len(a.Shape) > 1 {
		n1 = a.Shape[1]
	}
	for _, d := range a.Shape[min(2, len(a.Shape)):] {
		inner *= d
	}
	live := st.live(n1, P)
	var fa, fb []float32
	for o := 0; o < outer; o++ {
		for i := o * n1 * inner; i < (o*n1+live)*inner; i++ {
			if a.I64 != nil {
				if a.I64[i] != b.I64[i] {
					return 1, math.Abs(float64(a.I64[i] - b.I64[i])), nil
				}
				continue
			}
			x, y := a.F32[i], b.F32[i]
			if math.IsInf(float64(x), 0) || math.IsInf(float64(y), 0) {
				if x != y {
					return 0, 0, fmt.Errorf("element %d: %v vs %v", i, x, y)
				}
				continue
			}
			fa, fb = append(fa, x), append(fb, y)
		}
	}
	rel, maxAbs = unseenRel(fa, fb)
	return rel, maxAbs, nil
}
