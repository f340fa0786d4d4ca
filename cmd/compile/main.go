package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/cpu"
	_ "github.com/ds4go/ds4/backends/cuda"
	_ "github.com/ds4go/ds4/backends/gorgonia"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/plan"
)

func main() { cli.Main("compile", run) }

type options struct {
	model, config, out      string
	explain, explainJSON    bool
	dumpAfter, dumpDir      string
	backend                 string
	passes                  string
	timePasses, stats       bool
	placement               bool
	statsBatch, statsTokens int
	maxBatch                int
	dumps                   *fileio.Dir // where -dump-after files go, committed at the end
}

func run(args []string) (err error) {
	var o options
	fs := cli.NewFlagSet("compile", usage)
	fs.StringVar(&o.model, "model", "", "checkpoint directory holding config.json")
	fs.StringVar(&o.config, "config", "", "config file (flat inference config or Hugging Face config.json): shapes only, no weights")
	fs.StringVar(&o.out, "o", "", "write the plan to this file")
	fs.BoolVar(&o.explain, "explain", false, "print the parameter accounting tree")
	fs.BoolVar(&o.explainJSON, "explain-json", false, "print the parameter accounting as JSON (docs/explain-json.md)")
	fs.StringVar(&o.dumpAfter, "dump-after", "", "write the IR text after this stage (build, a pass name, or all)")
	fs.StringVar(&o.dumpDir, "dump-dir", "", "directory for -dump-after files")
	fs.StringVar(&o.backend, "backend", "cpu", "backend recorded in the plan")
	fs.StringVar(&o.passes, "passes", "default", "optional passes to run: default, none, or a comma-separated list")
	fs.BoolVar(&o.timePasses, "time-passes", false, "print the time of each pass")
	fs.BoolVar(&o.stats, "stats", false, "print optimisation statistics as JSON (docs/stats.md)")
	fs.IntVar(&o.statsBatch, "stats-batch", 1, "batch for -stats memory planning")
	fs.IntVar(&o.statsTokens, "stats-tokens", 1024, "prefill tokens for -stats memory planning")
	fs.BoolVar(&o.placement, "placement", false, "print which backend (-backend and its fallbacks) runs each op of the optimised graphs, the segments and the bytes crossing per call")
	fs.IntVar(&o.maxBatch, "max-batch", 0, "largest batch exec may run with the plan (recorded as max_batch; 0 = unlimited)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := o.check(cli.Visited(fs)); err != nil {
		return err
	}
	src := o.config
	if o.model != "" {
		st, err := os.Stat(o.model)
		if err != nil {
			return fmt.Errorf("-model: %v", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("-model %s: not a directory (give the checkpoint directory)", o.model)
		}
		src = filepath.Join(o.model, "config.json")
	}
	cfg, err := deepseekv4.LoadConfig(src)
	if err != nil {
		return err
	}
	if err := checkOutputs(o); err != nil {
		return err
	}
	if o.dumpDir != "" {
		if o.dumps, err = fileio.CreateDir(o.dumpDir); err != nil {
			return fmt.Errorf("-dump-dir %v", err)
		}
		defer func() { err = finishDumps(o.dumps, err) }()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, s := range cfg.IgnoredParts() {
		fmt.Fprintf(os.Stderr, "compile: note: %s\n", s)
	}
	if u := cfg.UnusedKeys(); len(u) > 0 {
		fmt.Fprintf(os.Stderr, "compile: note: %s: keys not used by the text model (ignored): %s\n", src, strings.Join(u, ", "))
	}
	m, err := deepseekv4.BuildModule(cfg)
	if err != nil {
		return &cli.Internal{Err: err}
	}
	if err := ir.VerifyModule(m); err != nil {
		return &cli.Internal{Err: fmt.Errorf("built graph does not verify: %v", err)}
	}
	if err := dump(o, "build", m); err != nil {
		return err
	}
	if o.explain || o.explainJSON {
		acc := deepseekv4.Account(cfg, m.Graph("prefill"))
		if o.explainJSON {
			js, _ := json.MarshalIndent(acc, "", "  ")
			fmt.Println(string(js))
		} else {
			fmt.Print(acc.Format())
		}
	}
	passNames, err := optimise(o, cfg, m)
	if err != nil {
		return err
	}
	if o.placement {
		if err := printPlacement(m, o.backend); err != nil {
			return err
		}
	}
	if o.out == "" {
		return nil
	}
	cj, _ := json.Marshal(cfg)
	p := &plan.Plan{Header: plan.Header{Model: "deepseek-v4.1", ConfigFingerprint: cfg.Fingerprint(), Backend: o.backend, Passes: passNames, Config: cj, MaxBatch: o.maxBatch}, Module: m}
	if o.model != "" {
		abs, err := filepath.Abs(o.model)
		if err != nil {
			return err
		}
		p.ModelDir = abs
	}
	if err := plan.Write(o.out, p); err != nil {
		return fmt.Errorf("-o %v", err)
	}
	return nil
}

// checkOutputs refuses, before any work, an output that is a directory, a
// FIFO or an input (internal/fileio; -dump-dir: fileio.CreateDir).
func checkOutputs(o options) error {
	if o.out != "" {
		if err := fileio.CheckOutput(o.out); err != nil {
			return fmt.Errorf("-o %v", err)
		}
	}
	return nil
}

// finishDumps puts the -dump-after files in place when compile succeeded or
// failed on a bug of its own (they are what a report of it needs), and
// removes them on bad input; a signal removes them too (internal/cli).
func finishDumps(d *fileio.Dir, err error) error {
	var in *cli.Internal
	if err != nil && !errors.As(err, &in) {
		d.Remove()
		return err
	}
	if cerr := d.Commit(); cerr != nil && err == nil {
		return fmt.Errorf("-dump-dir %v", cerr)
	}
	return err
}

func dump(o options, stage string, m *ir.Module) error {
	if o.dumps == nil || (o.dumpAfter != "all" && o.dumpAfter != stage) {
		return nil
	}
	return o.dumps.WriteFile(strings.ReplaceAll(stage, "/", "_")+".ir", []byte(ir.Format(m)))
}

// printPlacement prints where each op of m's graphs runs on backend be
// (backends.Schedule: by capability, with the fallbacks), with the bytes
// crossing per call at batch 1, 4096 positions.
func printPlacement(m *ir.Module, be string) error {
	for _, g := range m.Graphs {
		pl, err := backends.Schedule(g, be)
		if err != nil {
			return fmt.Errorf("-placement: %v", err)
		}
		b := ir.Bindings{B: 1, S: 4096, M: 4096}
		if g.Name == "decode" {
			b = ir.Bindings{B: 1, S: 1, M: 4096, P: 4095}
		}
		fmt.Print(pl.Report(b))
	}
	return nil
}
