package tests

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
	"github.com/ds4go/ds4/synth"
)

// chunkRun is what a prefill (in chunks of chunk tokens, 0: one call) and
// the greedy decode steps after it left: the last position's logits, every
// state after the prefill, and each decode step's logits.
type chunkRun struct {
	last   [][]float32
	states map[string][]float32 // live part (unseenState.live) of each state, float or int bits
	decode [][][]float32
}

// chunkPrefill prefills ids on model in chunks of chunk tokens and decodes
// steps greedy tokens after it.
func chunkPrefill(t *testing.T, model *engine.Model, sts []unseenState, ids [][]int64, chunk, steps int) chunkRun {
	t.Helper()
	return optPrefill(t, model, sts, ids, engine.Options{PrefillChunk: chunk}, steps)
}

// optPrefill is chunkPrefill with the session's options (Batch and MaxLen
// set here).
func optPrefill(t *testing.T, model *engine.Model, sts []unseenState, ids [][]int64, opt engine.Options, steps int) chunkRun {
	t.Helper()
	S := len(ids[0])
	chunk := opt.PrefillChunk
	opt.Batch, opt.MaxLen = len(ids), S+steps+1
	s, err := model.NewSession(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lg, err := s.Prefill(ids)
	if err != nil {
		t.Fatalf("prefill in chunks of %d: %v", chunk, err)
	}
	if lg.S != 1 {
		t.Fatalf("chunks of %d: logits of %d positions, want the last one's", chunk, lg.S)
	}
	r := chunkRun{last: copyRows(lg.Last()), states: map[string][]float32{}}
	for _, st := range sts {
		x := s.State(st.name)
		if x == nil {
			t.Fatalf("no state %s", st.name)
		}
		outer, n1, inner := x.Shape[0], 1, 1
		if len(x.Shape) > 1 {
			n1 = x.Shape[1]
		}
		for _, d := range x.Shape[min(2, len(x.Shape)):] {
			inner *= d
		}
		live := st.live(n1, S)
		var v []float32
		for o := 0; o < outer; o++ {
			for i := o * n1 * inner; i < (o*n1+live)*inner; i++ {
				if x.I64 != nil {
					v = append(v, math.Float32frombits(uint32(x.I64[i])))
				} else {
					v = append(v, x.F32[i])
				}
			}
		}
		r.states[st.name] = v
	}
	for range steps {
		next := make([]int64, len(ids))
		for b, row := range lg.Last() {
			next[b] = int64(argmaxF(row))
		}
		if lg, err = s.Decode(next); err != nil {
			t.Fatal(err)
		}
		r.decode = append(r.decode, copyRows(lg.Last()))
	}
	return r
}

func copyRows(rows [][]float32) [][]float32 {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = append([]float32(nil), r...)
	}
	return out
}

func argmaxF(v []float32) int {
	bi := 0
	for i, x := range v {
		if x > v[bi] {
			bi = i
		}
	}
	return bi
}

// sameBits reports the first element where a and b differ in their bits.
func sameBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

// chunkCompare fails unless got has the bits of want.
func chunkCompare(t *testing.T, what string, got, want chunkRun) {
	t.Helper()
	for b := range want.last {
		if i, ok := sameBits(got.last[b], want.last[b]); !ok {
			t.Errorf("%s: last logits of row %d differ at %d: %v vs %v", what, b, i, got.last[b][max(i, 0)], want.last[b][max(i, 0)])
		}
	}
	for name, w := range want.states {
		if i, ok := sameBits(got.states[name], w); !ok {
			t.Errorf("%s: state %s differs at %d (%d vs %d live entries)", what, name, i, len(got.states[name]), len(w))
		}
	}
	for k := range want.decode {
		for b := range want.decode[k] {
			if i, ok := sameBits(got.decode[k][b], want.decode[k][b]); !ok {
				t.Errorf("%s: decode step %d, row %d: logits differ at %d", what, k, b, i)
			}
		}
	}
}

// chunkModels are the checkpoints the chunked prefill is checked on: the
// golden tiny one and unseen6's synthetic one (other shapes, window 16).
func chunkModels(t *testing.T) map[string]func(backend string) (*engine.Model, *deepseekv4.Config) {
	t.Helper()
	open := func(dir string, cfg *deepseekv4.Config) func(string) (*engine.Model, *deepseekv4.Config) {
		m, err := deepseekv4.BuildModule(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
			t.Fatal(err)
		}
		return func(backend string) (*engine.Model, *deepseekv4.Config) {
			return unseenOpen(t, m, dir, backend), cfg
		}
	}
	tiny, err := deepseekv4.LoadConfig(filepath.Join(tinyDir(), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	u6, err := deepseekv4.LoadConfig(filepath.Join(repoRoot(), "testdata", "unseen6", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ck := t.TempDir()
	if err := synth.Write(ck, u6, 1, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	return map[string]func(string) (*engine.Model, *deepseekv4.Config){"tiny": open(tinyDir(), tiny), "unseen6": open(ck, u6)}
}

// TestChunkedPrefillIdentity checks that a prompt prefilled in chunks gives
// the bits of one prefill call: the last position's logits, every live
// cache and compressor state, and the logits of decode steps after it, at
// chunk sizes that split compressor groups (ratio 2) and the window (8 in
// tiny, 16 in unseen6), on both CPU backends.
func TestChunkedPrefillIdentity(t *testing.T) {
	models := chunkModels(t)
	cases := []struct {
		model  string
		S      int
		chunks []int
	}{
		{"tiny", 41, []int{1, 3, 5, 8, 17}},
		{"tiny", 300, []int{64, 127, 129}},
		{"unseen6", 37, []int{1, 3, 5, 16, 17}},
	}
	for _, backend := range []string{"cpu-ref", "cpu"} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s/S=%d", backend, tc.model, tc.S), func(t *testing.T) {
				model, cfg := models[tc.model](backend)
				sts := unseenStates(model, cfg)
				ids := unseenTokens(2, tc.S, cfg.VocabSize, uint64(tc.S))
				want := chunkPrefill(t, model, sts, ids, 0, 3)
				for _, c := range tc.chunks {
					chunkCompare(t, fmt.Sprintf("chunks of %d", c), chunkPrefill(t, model, sts, ids, c, 3), want)
				}
			})
		}
	}
}

// TestChunkedPrefillBatch checks the serve path: a slot of a batch
// (continuous batching on row views, and one session per slot) prefilled
// in chunks has the last logits of the unchunked prefill, and so has the
// decode step after it.
func TestChunkedPrefillBatch(t *testing.T) {
	model, cfg := chunkModels(t)["tiny"]("cpu")
	sts := unseenStates(model, cfg)
	ids := unseenTokens(1, 41, cfg.VocabSize, 41)
	want := chunkPrefill(t, model, sts, ids, 0, 1)
	for _, perSlot := range []bool{false, true} {
		b, err := model.NewBatch(engine.BatchOptions{Slots: 2, MaxLen: 64, PrefillChunk: 5, PerSlot: perSlot})
		if err != nil {
			t.Fatal(err)
		}
		lg, err := b.Prefill(1, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if i, ok := sameBits(lg, want.last[0]); !ok {
			t.Errorf("per slot %v: prefill logits differ at %d", perSlot, i)
		}
		step, err := b.Step([]int{1}, []int64{int64(argmaxF(lg))})
		if err != nil {
			t.Fatal(err)
		}
		if i, ok := sameBits(step[0], want.decode[0][0]); !ok {
			t.Errorf("per slot %v: decode logits differ at %d", perSlot, i)
		}
		b.Close()
	}
}
