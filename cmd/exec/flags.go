package main

import (
	"fmt"
	"math"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/cli"
)

// maxTokens bounds the token-count flags (-max-len, -max-new-tokens,
// -bench-context, -bench-decode, -bench-prefill): far more than any memory
// holds (the session memory check refuses much less), and small enough
// that their sums cannot overflow.
const (
	maxTokens    = 1 << 40
	maxTokensWhy = "far above what memory holds; the memory check refuses much less"
)

// minTemperature is the smallest sampling temperature: below it logits / T
// overflows float64 for ordinary logits (and sampling is greedy anyway).
const minTemperature = 1e-6

// check refuses flags out of range and flags given without the one they
// only make sense with (set: the flags given on the command line).
func (o *options) check(set map[string]bool) error {
	if o.plan == "" && !o.synth.on {
		return fmt.Errorf("-plan is required (make one with: compile -model DIR -o FILE)")
	}
	for _, err := range []error{
		cli.Needs(set, "bench", "json", "bench-prefill", "bench-long", "bench-context", "bench-decode", "bench-repeats", "probe-mb", "op-times", "layer-times"),
		cli.Excludes(set, "bench", "it times random prompts", "prompt-ids", "trace-in", "trace-out", "dump", "max-new-tokens", "max-len", "temperature", "top-k", "top-p"),
		// with -synthetic, -seed picks the weights
		cli.Excludes(map[string]bool{"bench": set["bench"] && !set["synthetic"], "seed": set["seed"]}, "bench", "it times random prompts", "seed"),
		o.synth.check(set),
		cli.Excludes(set, "trace-in", "the prompt comes from the trace", "prompt-ids"),
		o.text.check(set),
		cli.Excludes(set, "placement", "it prints the placement and runs nothing", "bench", "prompt-ids", "trace-in", "trace-out", "dump", "max-new-tokens", "temperature", "seed", "top-k", "top-p", "max-memory", "model", "cpuprofile"),
		cli.IntRange("max-new-tokens", int64(o.maxNew), 0, maxTokens, maxTokensWhy),
		cli.IntRange("max-len", int64(o.maxLen), 0, maxTokens, maxTokensWhy),
		cli.IntRange("prefill-chunk", int64(o.prefillChunk), 0, maxTokens, maxTokensWhy),
		checkTemperature(o.temperature),
		o.bench.check(),
	} {
		if err != nil {
			return err
		}
	}
	for _, f := range []string{"seed", "top-k", "top-p"} {
		if set[f] && o.temperature == 0 && !(f == "seed" && o.synth.on) {
			return fmt.Errorf("-%s only makes sense with -temperature > 0 (greedy decoding draws no random numbers)", f)
		}
	}
	return nil
}

// sampling is the sampler the flags ask for.
func (o *options) sampling() engine.Sampling {
	return engine.Sampling{Temperature: o.temperature, TopK: o.text.topK, TopP: o.text.topP}
}

// checkTemperature: 0 (greedy) or a finite value ≥ minTemperature.
func checkTemperature(t float64) error {
	switch {
	case t < 0 || math.IsNaN(t):
		return fmt.Errorf("-temperature %v: must be ≥ 0", t)
	case math.IsInf(t, 0):
		return cli.Finite("temperature", t)
	case t > 0 && t < minTemperature:
		return fmt.Errorf("-temperature %v: must be 0 (greedy) or ≥ %g (below, logits / T overflow)", t, minTemperature)
	}
	return nil
}
