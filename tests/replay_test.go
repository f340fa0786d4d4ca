package tests

import (
	"fmt"
	"testing"

	"github.com/ds4go/ds4/engine"
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
