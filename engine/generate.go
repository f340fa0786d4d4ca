package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
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
// checkpoint's config. (A token map that is missing or unreadable is left
// to Open, which binds it and reports that.)
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
	MaxNew      int     // tokens to generate per row (the prefill's sample is the first)
	Temperature float64 // 0: greedy
	Seed        uint64  // the sampler's seed (Temperature > 0)
	// Forced, when not nil, is fed instead of the samples: decode step i
	// reads column i (teacher forcing; the samples are still returned).
	Forced [][]int64
	// Logits, when not nil, sees the logits of every call: "prefill" (all
	// positions) and "decodeNN" (the last position of each row).
	Logits func(call string, lg *Logits)
}

// Generation is what Generate produced.
type Generation struct {
	IDs         [][]int64 // the generated ids of each row
	DecodeSteps int       // decode calls made
	Prefill     time.Duration
	Decode      time.Duration
}

// Generate runs the prompt and decodes o.MaxNew tokens per row: the sample
// of the prefill's last logits, then one decode call per further token.
func (s *Session) Generate(prompt [][]int64, o GenerateOptions) (*Generation, error) {
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	g := &Generation{IDs: make([][]int64, len(prompt))}
	t0 := time.Now()
	lg, err := s.Prefill(prompt)
	if err != nil {
		return nil, err
	}
	g.Prefill = time.Since(t0)
	if o.Logits != nil {
		o.Logits("prefill", lg)
	}
	next := Sample(lg.Last(), o.Temperature, rng)
	t1 := time.Now()
	for i := 0; i < o.MaxNew; i++ {
		for b := range g.IDs {
			g.IDs[b] = append(g.IDs[b], next[b])
		}
		if i == o.MaxNew-1 {
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
		next = Sample(lg.Last(), o.Temperature, rng)
	}
	g.Decode = time.Since(t1)
	return g, nil
}

func column(m [][]int64, i int) []int64 {
	out := make([]int64, len(m))
	for b := range m {
		out[b] = m[b][i]
	}
	return out
}

// Sample picks one id per row: argmax at temperature 0, else the
// reference's Gumbel-max form argmax(softmax(l/T) / Exp(1)).
func Sample(rows [][]float32, temp float64, rng *rand.Rand) []int64 {
	out := make([]int64, len(rows))
	for b, l := range rows {
		best, bi := math.Inf(-1), 0
		if temp == 0 {
			for i, v := range l {
				if float64(v) > best {
					best, bi = float64(v), i
				}
			}
		} else {
			mx := math.Inf(-1)
			for _, v := range l {
				mx = max(mx, float64(v)/temp)
			}
			for i, v := range l {
				p := math.Exp(float64(v)/temp-mx) / rng.ExpFloat64()
				if p > best {
					best, bi = p, i
				}
			}
		}
		out[b] = int64(bi)
	}
	return out
}
