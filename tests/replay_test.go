package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
	"github.com/ds4go/ds4/synth"
)

// TestBoundedReplayIdentity checks bounded replay (passes.BoundedRows,
// on by default for a batch of one): the last position's logits, every
// live cache and compressor state after the prompt, and the greedy decode
// steps after it have the bits of the prefill that computes every layer
// on every row (Options.FullRows), in one call and in chunks (chunks
// that end before the last layers' rows begin, inside them, and a last
// chunk shorter than the window), on both CPU backends.
func TestBoundedReplayIdentity(t *testing.T) {
	models := chunkModels(t)
	cases := []struct {
		model  string
		S      int
		chunks []int
	}{
		{"tiny", 5, []int{0}},
		{"tiny", 41, []int{0, 3, 8, 17}},
		{"tiny", 300, []int{0, 64, 127, 299}},
		{"unseen6", 37, []int{0, 5, 16}},
		{"unseen6", 200, []int{0, 33, 199}},
	}
	for _, backend := range []string{"cpu-ref", "cpu"} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s/S=%d", backend, tc.model, tc.S), func(t *testing.T) {
				model, cfg := models[tc.model](backend)
				sts := unseenStates(model, cfg)
				ids := unseenTokens(1, tc.S, cfg.VocabSize, uint64(tc.S)+7)
				want := optPrefill(t, model, sts, ids, engine.Options{FullRows: true}, 3)
				for _, c := range tc.chunks {
					chunkCompare(t, fmt.Sprintf("bounded, chunks of %d", c), optPrefill(t, model, sts, ids, engine.Options{PrefillChunk: c}, 3), want)
				}
			})
		}
	}
}

// TestBoundedReplayReleasedPattern checks bounded replay on a synthetic
// checkpoint of the released layer pattern (bench/configs/released40.json:
// 40 layers, kv sources 2/8/14/20, reindexing 24/28/32/36) at a window
// of 8, where layers 21-39 compute 141..8 of a 400-token prompt's rows
// (the pass's figures, checked first): in one call and in chunks, the
// last logits, every cache and the decode after it are bit-identical to
// the prefill on every row.
func TestBoundedReplayReleasedPattern(t *testing.T) {
	if testing.Short() {
		t.Skip("40 layers: a few seconds")
	}
	data, err := os.ReadFile(filepath.Join(repoRoot(), "bench", "configs", "released40.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	raw["window_size"], raw["dim"], raw["index_topk"] = 8, 128, 16
	data, _ = json.Marshal(raw)
	cfg, err := deepseekv4.ParseConfig(data, "released40 at window 8")
	if err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	const S = 400
	rows := passes.LayerRows(m.Graph("prefill"), S)
	for l, r := range rows {
		want := int64(S)
		if l > 20 {
			want = int64(8 + (39-l)*7)
		}
		if r != want {
			t.Fatalf("layer %d computes %d rows, want %d (%s)", l, r, want, passes.FormatLayerRows(rows))
		}
	}
	ck := t.TempDir()
	if err := synth.Write(ck, cfg, 3, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	model := unseenOpen(t, m, ck, "cpu")
	sts := unseenStates(model, cfg)
	ids := unseenTokens(1, S, cfg.VocabSize, 11)
	want := optPrefill(t, model, sts, ids, engine.Options{FullRows: true}, 2)
	for _, c := range []int{0, 150, 399} {
		chunkCompare(t, fmt.Sprintf("bounded, chunks of %d", c), optPrefill(t, model, sts, ids, engine.Options{PrefillChunk: c}, 2), want)
	}
}
