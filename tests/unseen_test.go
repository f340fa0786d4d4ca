package tests

import (
	"fmt"
	"math"
	"testing"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// Robustness on shapes the golden tiny run never saw. Every case synthesises
// a random checkpoint (package synth), then checks:
//
//   - the logits of every call are finite with a sane spread;
//   - decode/prefill consistency: the logits of a prefill of S tokens and of
//     N decode steps equal the logits at the same positions of one prefill
//     of all S+N tokens (rel L2 per position <= unseenTol);
//   - the caches (the live part of every state tensor) after the prefill +
//     decode steps equal those after the one-call prefill;
//   - rows of a batch do not mix, compressed layers carry context beyond
//     the window, and a window-only model's receptive field is exact.
//
// With the reference kernels a row is computed the same way whatever the
// call shape, so prefill and decode agree bit for bit (measured 0 on every
// case): a bug in the window ring, the compressed rows or the top-k widths
// shows as a difference. The fast kernels sum in another order for one row
// than for many: ~1e-7, until a near tie of a top-k or of an fp8/fp4
// quantisation step flips in one case (measured worst, logits / caches rel
// L2: portable 6.9e-3 / 1.3e-2 (cache max abs 0.25), AVX2 9.7e-4 / 1.2e-7;
// AVX-512 not measured), which unseenFastTol allows with a margin of 2x.

// unseenFastTol bounds the fast kernels' decode/prefill differences
// (rel L2 of logits rows and of cache tensors, max abs of cache elements).
var unseenFastTol = struct{ rel, abs float64 }{3e-2, 0.5}

type unseenCase struct {
	name    string
	edit    func(t *testing.T, c *deepseekv4.Config)
	B, S, N int // batch, prompt length, decode steps
	extra   int // maximum length beyond S+N (cache rows never written)
}

var unseenCases = []unseenCase{
	{
		// Prompt and decode run past a window of 4 (ring written by a long
		// prefill, then wrapped by decode); Engram on the first and last layer.
		name: "window4_long_prompt",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.NLayers, c.WindowSize = 6, 4
			c.CompressRatios = []int{0, 2, 2, 1, 1, 1}
			c.KVSourceLayers, c.IndexSourceLayers = []int{1, 3}, []int{1, 3, 4}
			c.CandidateSourceLayer = 3
			unseenEngram(t, c, 0, 5)
		},
		B: 2, S: 11, N: 6, extra: 5,
	},
	{
		// head_dim 128 with rope 32, ratio-2 layers only (one reindex), no
		// Engram, no candidates, index_topk larger than the compressed rows,
		// hc_mult 2, one activated expert (no renormalisation), sigmoid
		// scores, odd prompt length, batch 1.
		name: "hd128_ratio2_only_top1",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.NLayers, c.HeadDim, c.RopeHeadDim, c.IndexHeadDim = 4, 128, 32, 64
			c.NHeads, c.OGroups, c.OLoraRank = 2, 1, 64
			c.CompressRatios = []int{2, 2, 2, 2}
			c.KVSourceLayers, c.IndexSourceLayers = []int{0, 2}, []int{0, 1, 2}
			c.CandidateSourceLayer, c.IndexTopK = -1, 16
			c.HCMult, c.NActivatedExperts, c.ScoreFunc = 2, 1, "sigmoid"
			unseenEngram(t, c)
		},
		B: 1, S: 7, N: 5,
	},
	{
		// Ratio-1 layers only, prompts of one token, window 3 wrapped by
		// decode, candidates from layer 0 used by layer 2, fp8 experts, no
		// SwiGLU clamp, softmax scores without renormalisation, batch 3.
		name: "ratio1_only_one_token",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.NLayers, c.WindowSize = 3, 3
			c.CompressRatios = []int{1, 1, 1}
			c.KVSourceLayers, c.IndexSourceLayers = []int{0}, []int{0, 2}
			c.CandidateSourceLayer, c.CandidateTopKBlocks, c.CandidateBlockSize = 0, 2, 2
			c.ExpertDtype, c.SwiGLULimit = "fp8", 0
			c.ScoreFunc, c.NormTopKProb = "softmax", false
			c.EngramMaxNgramSize, c.EngramNHeads = 2, 1
			unseenEngram(t, c, 1)
		},
		B: 3, S: 1, N: 7,
	},
	{
		// Sliding-window layers only (no compressor, no indexer), window 5,
		// 4-gram Engram, 4 heads in 4 output groups.
		name: "swa_only",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.NLayers, c.WindowSize = 3, 5
			c.CompressRatios = []int{0, 0, 0}
			c.KVSourceLayers, c.IndexSourceLayers, c.CandidateSourceLayer = nil, nil, -1
			c.OGroups, c.OLoraRank = 4, 32
			c.EngramMaxNgramSize = 4
			unseenEngram(t, c, 2)
		},
		B: 2, S: 12, N: 6,
	},
	{
		// The tiny layout with window 6, index_topk above the compressed
		// rows, more candidate blocks kept than exist (blocks of 3), batch 3,
		// odd lengths, caches longer than the run.
		name: "tiny_layout_wide_topk",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.WindowSize, c.IndexTopK = 6, 64
			c.CandidateTopKBlocks, c.CandidateBlockSize = 50, 3
		},
		B: 3, S: 13, N: 5, extra: 3,
	},
	{
		// Ratio-2 source at layer 0 (and a reindex layer) from a
		// one-token prompt: the prefill emits no compressed row (empty
		// compressor output, empty key cache read, top-k over zero rows);
		// one candidate block of 2 rows.
		name: "ratio2_first_layer_short_prompt",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.NLayers = 3
			c.CompressRatios = []int{2, 2, 0}
			c.KVSourceLayers, c.IndexSourceLayers = []int{0}, []int{0, 1}
			c.CandidateSourceLayer, c.CandidateTopKBlocks, c.CandidateBlockSize = 0, 1, 2
			unseenEngram(t, c, 1)
		},
		B: 2, S: 1, N: 10,
	},
	{
		// Ratio 4: gated pooling over groups of four (prefill tail of 3
		// tokens kept in the compressor state, decode completing groups).
		name: "ratio4_gated_groups",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.NLayers = 3
			c.CompressRatios = []int{0, 4, 4}
			c.KVSourceLayers, c.IndexSourceLayers = []int{1}, []int{1}
			c.CandidateSourceLayer, c.CandidateTopKBlocks, c.CandidateBlockSize = -1, 0, 0
			unseenEngram(t, c, 0)
		},
		B: 2, S: 11, N: 9,
	},
	{
		// Sizes that are not powers of two: dim 96, 3 heads in 3 output
		// groups, hc_mult 3, 5 experts, rope 8, 3 index heads, odd vocab,
		// Engram rows of 64 with 3 heads.
		name: "odd_sizes",
		edit: func(t *testing.T, c *deepseekv4.Config) {
			c.VocabSize, c.Dim, c.MoEInterDim, c.QLoraRank = 301, 96, 96, 96
			c.NHeads, c.OGroups, c.OLoraRank, c.RopeHeadDim = 3, 3, 32, 8
			c.NRoutedExperts, c.NActivatedExperts, c.HCMult = 5, 2, 3
			c.NLayers, c.WindowSize = 4, 5
			c.CompressRatios = []int{0, 2, 1, 1}
			c.KVSourceLayers, c.IndexSourceLayers = []int{1, 2}, []int{1, 2, 3}
			c.IndexNHeads, c.IndexTopK = 3, 3
			c.CandidateSourceLayer, c.CandidateTopKBlocks, c.CandidateBlockSize = 2, 2, 3
			c.EngramHeadDim, c.EngramNHeads, c.EngramMaxNgramSize = 64, 3, 3
			c.EngramCompressedVocabSize, c.EngramPadID = 250, 7
			unseenEngram(t, c, 0, 3)
		},
		B: 2, S: 9, N: 5,
	},
	{
		// The tiny layout from a one-token prompt (ratio-2 layers see S < ratio).
		name: "tiny_layout_one_token",
		edit: func(t *testing.T, c *deepseekv4.Config) {},
		B:    1, S: 1, N: 6,
	},
}

func TestUnseenShapes(t *testing.T) {
	for i, tc := range unseenCases {
		t.Run(tc.name, func(t *testing.T) {
			c := unseenBase(t)
			tc.edit(t, c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			model := unseenModel(t, c, uint64(100+i))
			for _, k := range goldKernelSets {
				goldWithKernels(t, k, func(t *testing.T, backend string) {
					rel, abs := 0.0, 0.0 // the reference kernels: bit-identical
					if k.fast {
						rel, abs = unseenFastTol.rel, unseenFastTol.abs
					}
					on := model
					if backend != model.Backend {
						on = unseenOpen(t, model.Module, model.Dir, backend)
					}
					unseenConsistency(t, on, c, tc, uint64(7+i), rel, abs)
				})
			}
		})
	}
}

// unseenConsistency runs prefill S + N decode steps and one prefill of S+N
// tokens, and checks that the logits (rel L2 per row) and the caches (rel
// L2 per tensor, max abs per element) agree within rel and abs.
func unseenConsistency(t *testing.T, model *engine.Model, c *deepseekv4.Config, tc unseenCase, seed uint64, rel, abs float64) {
	t.Helper()
	toks := unseenTokens(tc.B, tc.S+tc.N, model.Vocab, seed)
	opt := engine.Options{Batch: tc.B, MaxLen: tc.S + tc.N + tc.extra, FullLogits: true}

	step, err := model.NewSession(opt)
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([][]int64, tc.B)
	for b := range prompt {
		prompt[b] = toks[b][:tc.S]
	}
	pre, err := step.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	unseenSane(t, "prefill", pre)
	var dec []*engine.Logits
	for i := 0; i < tc.N; i++ {
		col := make([]int64, tc.B)
		for b := range col {
			col[b] = toks[b][tc.S+i]
		}
		l, err := step.Decode(col)
		if err != nil {
			t.Fatalf("decode %d: %v", i, err)
		}
		unseenSane(t, fmt.Sprintf("decode %d", i), l)
		dec = append(dec, l)
	}

	one, err := model.NewSession(opt)
	if err != nil {
		t.Fatal(err)
	}
	full, err := one.Prefill(toks)
	if err != nil {
		t.Fatal(err)
	}
	unseenSane(t, "one-call prefill", full)

	worst := 0.0
	check := func(what string, got []float32, b, pos int) {
		r, mx := unseenRel(got, unseenRow(full, b, pos))
		worst = math.Max(worst, r)
		if !(r <= rel) {
			t.Errorf("%s, row %d: logits differ from the one-call prefill at position %d: rel L2 %.3e (max abs %.3e), want ≤ %.0e", what, b, pos, r, mx, rel)
		}
	}
	for b := 0; b < tc.B; b++ {
		for s := 0; s < tc.S; s++ {
			check("prefill", unseenRow(pre, b, s), b, s)
		}
		for i, l := range dec {
			check(fmt.Sprintf("decode %d", i), unseenRow(l, b, 0), b, tc.S+i)
		}
	}

	// The comparison discriminates: a decode step's logits differ from
	// those of the previous position by O(1).
	if tc.N > 1 {
		if r, _ := unseenRel(unseenRow(dec[1], 0, 0), unseenRow(full, 0, tc.S)); r < 0.3 {
			t.Errorf("decode 1 is within rel %.2e of the previous position: the logits do not depend on the input", r)
		}
	}
	unseenReach(t, model, c, toks, full)

	P := tc.S + tc.N
	worstState, worstAbs := 0.0, 0.0
	for _, st := range unseenStates(model, c) {
		r, mx, err := unseenStateDiff(st, step.State(st.name), one.State(st.name), P)
		if err != nil {
			t.Errorf("state %s: %v", st.name, err)
			continue
		}
		worstState, worstAbs = math.Max(worstState, r), math.Max(worstAbs, mx)
		if !(r <= rel) || !(mx <= abs) {
			t.Errorf("state %s after prefill %d + %d decode steps differs from a prefill of %d: rel L2 %.3e, max abs %.3e, want ≤ %.0e, %.0e", st.name, tc.S, tc.N, P, r, mx, rel, abs)
		}
	}
	t.Logf("%s: logits rel L2 max %.2e, caches rel L2 max %.2e, max abs %.2e", tc.name, worst, worstState, worstAbs)
}

// unseenReach checks what a token can influence, with one-call prefills
// of the run's tokens with one token of row 0 changed: the other rows stay
// bit-identical (no mixing across the batch). With compressed layers,
// changing token 0 changes the last position's logits (context beyond the
// window is used). With window layers only, the last position's
// receptive field is exact: a change reach positions back changes its
// logits, one further back leaves them bit-identical (window widths right
// in every layer, Engram n-grams of the right length).
func unseenReach(t *testing.T, model *engine.Model, c *deepseekv4.Config, toks [][]int64, full *engine.Logits) {
	t.Helper()
	P := len(toks[0])
	run := func(pos int) *engine.Logits {
		alt := make([][]int64, len(toks))
		for b := range toks {
			alt[b] = append([]int64(nil), toks[b]...)
		}
		alt[0][pos] = (alt[0][pos] + 1) % int64(model.Vocab)
		s, err := model.NewSession(engine.Options{Batch: len(toks), MaxLen: P, FullLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Prefill(alt)
		if err != nil {
			t.Fatal(err)
		}
		for b := 1; b < len(toks); b++ {
			for p := 0; p < P; p++ {
				if rel, _ := unseenRel(unseenRow(got, b, p), unseenRow(full, b, p)); rel != 0 {
					t.Fatalf("changing row 0 changed row %d position %d (rel %.2e)", b, p, rel)
				}
			}
		}
		return got
	}
	lastRel := func(got *engine.Logits) float64 {
		rel, _ := unseenRel(unseenRow(got, 0, P-1), unseenRow(full, 0, P-1))
		return rel
	}
	compressed := false
	for _, r := range c.CompressRatios {
		compressed = compressed || r > 0
	}
	if compressed {
		if P > 1 && lastRel(run(0)) == 0 {
			t.Errorf("changing token 0 leaves the logits at position %d unchanged: the compressed context is not used", P-1)
		}
		return
	}
	// Window attention adds window-1 positions per layer; an Engram layer l
	// sees its n-gram of raw tokens, then the layers l.. add their windows.
	reach := c.NLayers * (c.WindowSize - 1)
	for _, l := range c.EngramLayerIDs {
		reach = max(reach, c.EngramMaxNgramSize-1+(c.NLayers-l)*(c.WindowSize-1))
	}
	if P-2-reach < 0 {
		t.Fatalf("run of %d tokens too short to test a receptive field of %d", P, reach)
	}
	if rel := lastRel(run(P - 1 - reach)); rel == 0 {
		t.Errorf("changing the token %d positions back leaves the last logits unchanged (receptive field %d expected)", reach, reach)
	}
	if rel := lastRel(run(P - 2 - reach)); rel != 0 {
		t.Errorf("changing the token %d positions back changes the last logits (rel %.2e), beyond the receptive field %d", reach+1, rel, reach)
	}
}
