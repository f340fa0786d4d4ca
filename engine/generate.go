package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/plan"
)

// The parts of a run that every caller of the runtime shares (exec, Go
// programs, the server to come): the checks of a plan against a checkpoint,
// the generation loop and the sampler.

// CheckPlan refuses to run plan p against the checkpoint in dir when they
// do not belong together: the config fingerprint the plan was compiled for,
// and an Engram token map that disagrees with the config. It returns the
// checkpoint's config. (A token map that is missing or unreadable, or one
// derived from tokenizer.json, is left to Open, which binds it, derives and
// checks it once, and reports that.)
func CheckPlan(p *plan.Plan, dir string) (*deepseekv4.Config, error) {
	cfg, err := deepseekv4.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	if fp := cfg.Fingerprint(); fp != p.ConfigFingerprint {
		return nil, fmt.Errorf("plan was compiled for config %s but %s has config %s: recompile the plan", p.ConfigFingerprint, dir, fp)
	}
	if err := checkTokenMap(cfg, dir); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkTokenMap refuses an Engram token map that disagrees with the config
// (Config.CheckTokenMap).
func checkTokenMap(cfg *deepseekv4.Config, dir string) error {
	if len(cfg.EngramLayerIDs) == 0 {
		return nil
	}
	path := filepath.Join(dir, TokenMapFile)
	f, err := safetensors.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	t, ok := f.Get("token_map")
	if !ok {
		return nil
	}
	v, err := t.Int64s()
	if err != nil || len(t.Shape) != 1 {
		return nil
	}
	if err := cfg.CheckTokenMap(v, f.Metadata); err != nil {
		return fmt.Errorf("%s: tensor \"token_map\": %v", path, err)
	}
	return nil
}

// PlanBackend is the backend to run plan p on: the one asked for, else the
// one the plan records (compile -backend), else "cpu".
func PlanBackend(p *plan.Plan, asked string) string {
	switch {
	case asked != "":
		return asked
	case p.Backend != "":
		return p.Backend
	}
	return "cpu"
}

// GenerateOptions say how Generate decodes.
type GenerateOptions struct {
	MaxNew int // tokens to generate per row (the sample of the prompt's last logits is the first)
	Sampling
	Seed uint64 // the sampler's seed (Temperature > 0)
	// Rand, when not nil, is the sampler's source instead of one seeded by
	// Seed (a conversation keeps one source over its turns).
	Rand *rand.Rand
	// Forced, when not nil, is fed instead of the samples: decode step i
	// reads column i (teacher forcing; the samples are still returned).
	Forced [][]int64
	// Logits, when not nil, sees the logits of every call: "prefill" (the
	// last position's; every position's with Options.FullLogits or a
	// tracer) and "decodeNN" (the last position of each row).
	Logits func(call string, lg *Logits)
	// Each, when not nil, sees each step's samples (one per row) as they
	// are drawn; returning true ends the generation after them (a stop
	// token or string, an interrupted answer).
	Each func(next []int64) (stop bool)
}

// Generation is what Generate produced.
type Generation struct {
	IDs         [][]int64 // the generated ids of each row
	DecodeSteps int       // decode calls made
	Prefill     time.Duration
	Decode      time.Duration
}

// Generate runs the prompt and decodes up to o.MaxNew tokens per row: the
// sample of the prompt's last logits, then one decode call per further
// token. The last sample is returned but not fed: the caches hold the
// prompt and every generated id but the last. On a session already at a
// position > 0 the prompt continues the sequence (Feed).
func (s *Session) Generate(prompt [][]int64, o GenerateOptions) (*Generation, error) {
	rng := o.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	}
	g := &Generation{IDs: make([][]int64, len(prompt))}
	t0 := time.Now()
	lg, err := s.Feed(prompt)
	if err != nil {
		return nil, err
	}
	g.Prefill = time.Since(t0)
	if o.Logits != nil {
		o.Logits("prefill", lg)
	}
	next := o.Sample(lg.Last(), rng)
	t1 := time.Now()
	for i := 0; i < o.MaxNew; i++ {
		for b := range g.IDs {
			g.IDs[b] = append(g.IDs[b], next[b])
		}
		if o.Each != nil && o.Each(next) || i == o.MaxNew-1 {
			break
		}
		feed := next
		if o.Forced != nil {
			feed = column(o.Forced, i)
		}
		if lg, err = s.Decode(feed); err != nil {
			return nil, err
		}
		g.DecodeSteps++
		if o.Logits != nil {
			o.Logits(fmt.Sprintf("decode%02d", i), lg)
		}
		next = o.Sample(lg.Last(), rng)
	}
	g.Decode = time.Since(t1)
	return g, nil
}

// Feed runs tokens (all rows the same length) at the session's position:
// the prefill graph from position 0, else one decode call per column. The
// prefill graph starts at position 0 only (Session.Prefill: its caches and
// compressors are written from an empty state), while the decode graph is
// the model's incremental form at any position, so a later turn of a
// conversation is fed through it token by token; its logits are those of
// the last column.
func (s *Session) Feed(tokens [][]int64) (*Logits, error) {
	if s.Pos == 0 {
		return s.Prefill(tokens)
	}
	if len(tokens) == 0 || len(tokens[0]) == 0 {
		return nil, fmt.Errorf("empty prompt")
	}
	if S := len(tokens[0]); s.Pos+S > s.opt.MaxLen {
		return nil, fmt.Errorf("%d tokens at position %d exceed the maximum length %d", S, s.Pos, s.opt.MaxLen)
	}
	for b := range tokens {
		if len(tokens[b]) != len(tokens[0]) {
			return nil, fmt.Errorf("row %d has %d tokens, row 0 has %d", b, len(tokens[b]), len(tokens[0]))
		}
	}
	var lg *Logits
	for i := range tokens[0] {
		var err error
		if lg, err = s.Decode(column(tokens, i)); err != nil {
			return nil, err
		}
	}
	return lg, nil
}

func column(m [][]int64, i int) []int64 {
	out := make([]int64, len(m))
	for b := range m {
		out[b] = m[b][i]
	}
	return out
}

// Sampling says how a token is drawn from a row of logits.
type Sampling struct {
	Temperature float64 // 0: greedy (argmax)
	TopK        int     // > 0: draw among the TopK largest logits only
	TopP        float64 // in (0, 1): draw among the fewest most likely ids whose probability reaches TopP (0 or 1: all)
}

// Sample picks one id per row: argmax at temperature 0, else the
// reference's Gumbel-max form argmax(softmax(l/T) / Exp(1)) over the ids
// that top-k and top-p keep (the most likely id is always kept).
func (sp Sampling) Sample(rows [][]float32, rng *rand.Rand) []int64 {
	out := make([]int64, len(rows))
	for b, l := range rows {
		if sp.Temperature == 0 {
			out[b] = int64(argmax(l))
			continue
		}
		keep := sp.candidates(l)
		mx := math.Inf(-1)
		for _, i := range keep {
			mx = max(mx, float64(l[i])/sp.Temperature)
		}
		best, bi := math.Inf(-1), keep[0]
		for _, i := range keep {
			p := math.Exp(float64(l[i])/sp.Temperature-mx) / rng.ExpFloat64()
			if p > best {
				best, bi = p, i
			}
		}
		out[b] = int64(bi)
	}
	return out
}

// candidates are the ids of row l that top-k and top-p keep, most likely
// first when either cuts (every id, in order, when neither does).
func (sp Sampling) candidates(l []float32) []int {
	cutK := sp.TopK > 0 && sp.TopK < len(l)
	cutP := sp.TopP > 0 && sp.TopP < 1
	var ids []int
	switch {
	case cutK:
		ids = topK(l, sp.TopK)
	case cutP:
		ids = make([]int, len(l))
		for i := range ids {
			ids[i] = i
		}
		slices.SortFunc(ids, likelier(l))
	default:
		ids = make([]int, len(l))
		for i := range ids {
			ids[i] = i
		}
		return ids
	}
	if !cutP {
		return ids
	}
	return sp.topP(l, ids)
}

// topP is the shortest prefix of ids (most likely first) whose
// probabilities at the temperature, over ids, reach sp.TopP.
func (sp Sampling) topP(l []float32, ids []int) []int {
	mx := float64(l[ids[0]]) / sp.Temperature
	p := make([]float64, len(ids))
	var sum float64
	for j, i := range ids {
		p[j] = math.Exp(float64(l[i])/sp.Temperature - mx)
		sum += p[j]
	}
	var acc float64
	for j := range ids {
		acc += p[j] / sum
		if acc >= sp.TopP {
			return ids[:j+1]
		}
	}
	return ids
}

// likelier orders the ids of row l: the larger logit first, the lower id
// on a tie (the order of a stable sort by logit; a total order, so any sort
// gives it).
func likelier(l []float32) func(a, b int) int {
	return func(a, b int) int {
		switch {
		case l[a] > l[b]:
			return -1
		case l[a] < l[b]:
			return 1
		}
		return cmp.Compare(a, b)
	}
}

// topK is the k ids of row l first in likelier's order, in that order,
// found with a heap of k ids (O(V log k), not a sort of the vocabulary:
// sorting 129k logits took 80 ms a step).
func topK(l []float32, k int) []int {
	order := likelier(l)
	h := make([]int, 0, k) // h[0] is the last kept id in order
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && order(h[c+1], h[c]) > 0 {
				c++
			}
			if order(h[c], h[i]) <= 0 {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for i := range l {
		switch {
		case len(h) < k:
			h = append(h, i)
			for j := len(h) - 1; j > 0 && order(h[j], h[(j-1)/2]) > 0; j = (j - 1) / 2 {
				h[j], h[(j-1)/2] = h[(j-1)/2], h[j]
			}
		case order(i, h[0]) < 0:
			h[0] = i
			down(0)
		}
	}
	slices.SortFunc(h, order)
	return h
}

func argmax(l []float32) int {
	best, bi := math.Inf(-1), 0
	for i, v := range l {
		if float64(v) > best {
			best, bi = float64(v), i
		}
	}
	return bi
}
