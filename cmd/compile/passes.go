package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
)

// optimise runs the pass pipeline on m and returns the passes that ran.
func optimise(o options, cfg *deepseekv4.Config, m *ir.Module) ([]string, error) {
	names := passes.ParseNames(o.passes) // checked by options.check
	var before *ir.Module
	if o.stats {
		var err error
		if before, err = deepseekv4.BuildModule(cfg); err != nil {
			return nil, &cli.Internal{Err: err}
		}
	}
	opts := passes.Options{}
	var dumpErr error
	if o.dumps != nil && o.dumpAfter != "" && o.dumpAfter != "build" {
		opts.DumpAfter = o.dumpAfter
		step := 0
		opts.Dump = func(pass, graph, text string) {
			step++
			if dumpErr != nil {
				return
			}
			dumpErr = o.dumps.WriteFile(fmt.Sprintf("%02d-%s-%s.ir", step, pass, graph), []byte(text))
		}
	}
	rep, err := passes.Run(m, names, opts)
	if err != nil {
		return nil, &cli.Internal{Err: err}
	}
	if dumpErr != nil {
		return nil, dumpErr
	}
	if o.timePasses {
		fmt.Fprint(os.Stderr, rep.Timings())
	}
	if o.stats {
		st, err := passes.Stats(before, m, o.statsBatch, o.statsTokens)
		if err != nil {
			return nil, err
		}
		js, _ := json.MarshalIndent(st, "", "  ")
		fmt.Println(string(js))
	}
	return rep.Ran, nil
}
