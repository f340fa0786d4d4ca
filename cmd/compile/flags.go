package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/passes"
)

// usage is the synopsis of -h: every flag appears in it (TestUsageNamesEveryFlag).
const usage = `compile (-model DIR | -config FILE) [-o FILE [-max-batch N]] [-backend NAME] [-placement] [-explain | -explain-json]
               [-dump-after all|build|PASS -dump-dir DIR] [-passes LIST] [-time-passes]
               [-stats [-stats-batch N] [-stats-tokens N]]`

// check refuses flags out of range, flags given without the one they only
// make sense with, and a command line that asks for no output (set: the
// flags given on the command line).
func (o *options) check(set map[string]bool) error {
	if (o.model == "") == (o.config == "") {
		return fmt.Errorf("give exactly one of -model DIR or -config FILE")
	}
	if o.maxBatch < 0 {
		return fmt.Errorf("-max-batch %d: must be >= 0 (0 = unlimited)", o.maxBatch)
	}
	if o.dumpAfter != "" && o.dumpDir == "" {
		return fmt.Errorf("-dump-after needs -dump-dir")
	}
	if o.explain && o.explainJSON {
		return fmt.Errorf("give one of -explain or -explain-json")
	}
	for _, err := range []error{
		cli.Needs(set, "dump-after", "dump-dir"),
		cli.Needs(set, "stats", "stats-batch", "stats-tokens"),
		cli.Needs(set, "o", "max-batch"),
		o.checkBackend(set),
		// The release runs batches of up to 4 and 1 048 576 positions:
		// these bounds are far above, and keep the planner's sizes small.
		cli.IntRange("stats-batch", int64(o.statsBatch), 1, 1<<16, "16384x the default max_batch_size 4"),
		cli.IntRange("stats-tokens", int64(o.statsTokens), 1, 1<<24, "16x the release's max_position_embeddings"),
		o.checkPasses(),
	} {
		if err != nil {
			return err
		}
	}
	if o.out == "" && !o.explain && !o.explainJSON && !o.stats && !o.timePasses && o.dumpAfter == "" && !o.placement {
		return fmt.Errorf("nothing to do: give -o FILE (or -explain, -explain-json, -stats, -time-passes, -dump-after, -placement)")
	}
	return nil
}

// checkPasses refuses an unknown -passes name and a -dump-after stage the
// run does not have.
func (o *options) checkPasses() error {
	sel, err := passes.Select(passes.ParseNames(o.passes))
	if err != nil {
		return fmt.Errorf("-passes: %v", err)
	}
	stages := []string{"all", "build"}
	for _, p := range sel {
		if !slices.Contains(stages, p.Name) {
			stages = append(stages, p.Name)
		}
	}
	if o.dumpAfter != "" && !slices.Contains(stages, o.dumpAfter) {
		return fmt.Errorf("-dump-after %s: not a stage of this run (one of: %s)", o.dumpAfter, strings.Join(stages, ", "))
	}
	return nil
}

// checkBackend: -backend is recorded in the plan (-o) or places the graphs
// (-placement), and names a registered backend (it need not be available
// on this machine: a plan may be compiled here for a GPU elsewhere).
func (o *options) checkBackend(set map[string]bool) error {
	if set["backend"] && !set["o"] && !set["placement"] {
		return fmt.Errorf("-backend only makes sense with -o or -placement")
	}
	if _, err := backends.Get(o.backend); err != nil {
		return fmt.Errorf("-backend: %v", err)
	}
	return nil
}
