package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/engine/bench"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
	"github.com/ds4go/ds4/plan"
	"github.com/ds4go/ds4/synth"
)

// synthOptions are -synthetic and -config (the model's random weights
// generated in memory, no checkpoint directory), and the backend options.
type synthOptions struct {
	on         bool
	config     string
	backendOpt []string // -backend-opt KEY=VALUE, in order
	cudaGraphs bool
	floorGBs   float64
}

func (s *synthOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.on, "synthetic", false, "with -bench: generate the model's random weights in memory from -config (the values synth writes; -seed picks them) instead of reading a checkpoint")
	fs.StringVar(&s.config, "config", "", "with -synthetic: the model config (flat or Hugging Face); the plan is compiled from it with the default passes unless -plan is given")
	fs.Func("backend-opt", "backend option `KEY=VALUE` handed to the backend (repeatable), e.g. cuda-graphs=false", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("want KEY=VALUE")
		}
		s.backendOpt = append(s.backendOpt, strings.TrimSpace(k)+"="+val)
		return nil
	})
	fs.BoolVar(&s.cudaGraphs, "cuda-graphs", true, "capture the decode step as a CUDA graph and replay it (the backend option cuda-graphs; -cuda-graphs=false launches every kernel)")
	fs.Float64Var(&s.floorGBs, "bench-floor-gbs", 0, "with -bench: the bandwidth in GB/s of the weight-bandwidth floor decode is measured against, e.g. 4300 for an H200 (0 = the device's own probe)")
}

// check refuses -synthetic without -bench or -config, and a bad floor.
func (s *synthOptions) check(set map[string]bool) error {
	for _, err := range []error{
		cli.Needs(set, "bench", "synthetic", "bench-floor-gbs"),
		cli.Needs(set, "synthetic", "config"),
		cli.Excludes(set, "synthetic", "the weights are generated from -config", "model"),
	} {
		if err != nil {
			return err
		}
	}
	if set["synthetic"] && s.config == "" {
		return fmt.Errorf("-synthetic needs -config FILE (the model whose weights it generates)")
	}
	if s.floorGBs < 0 || math.IsNaN(s.floorGBs) || math.IsInf(s.floorGBs, 0) {
		return fmt.Errorf("-bench-floor-gbs %v: must be a finite number ≥ 0", s.floorGBs)
	}
	return nil
}

// options returns the backend options of the flags: -backend-opt pairs
// and -cuda-graphs when given; a key given twice is refused.
func (s *synthOptions) options(set map[string]bool) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range s.backendOpt {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("-backend-opt %s: given twice", k)
		}
		m[k] = v
	}
	if set["cuda-graphs"] {
		if _, dup := m["cuda-graphs"]; dup {
			return nil, fmt.Errorf("-cuda-graphs and -backend-opt cuda-graphs=…: give one")
		}
		m["cuda-graphs"] = fmt.Sprint(s.cudaGraphs)
	}
	return m, nil
}

// checkUnread refuses a backend option that no backend of the run read.
func checkUnread(backend string) error {
	if u := backends.Unread(); len(u) > 0 {
		return fmt.Errorf("backend option %s: backend %s (and its fallbacks) does not read it", u[0], backend)
	}
	return nil
}

// synthPlan returns the plan of a -synthetic run: -plan when given (its
// config must be -config's), else -config compiled here with the default
// passes for the backend.
func synthPlan(o *options) (*plan.Plan, *deepseekv4.Config, error) {
	cfg, err := deepseekv4.LoadConfig(o.synth.config)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if o.plan != "" {
		p, err := plan.Read(o.plan)
		if err != nil {
			return nil, nil, err
		}
		if fp := cfg.Fingerprint(); fp != p.ConfigFingerprint {
			return nil, nil, fmt.Errorf("plan %s was compiled for config %s but -config %s is config %s: recompile the plan", o.plan, p.ConfigFingerprint, o.synth.config, fp)
		}
		return p, cfg, nil
	}
	m, err := deepseekv4.BuildModule(cfg)
	if err != nil {
		return nil, nil, &cli.Internal{Err: err}
	}
	if err := ir.VerifyModule(m); err != nil {
		return nil, nil, &cli.Internal{Err: fmt.Errorf("built graph does not verify: %v", err)}
	}
	rep, err := passes.Run(m, passes.ParseNames("default"), passes.Options{})
	if err != nil {
		return nil, nil, &cli.Internal{Err: err}
	}
	be := o.backend
	if be == "" {
		be = "cpu"
	}
	return &plan.Plan{Header: plan.Header{Model: "deepseek-v4.1", ConfigFingerprint: cfg.Fingerprint(), Backend: be, Passes: rep.Ran}, Module: m}, cfg, nil
}

// runSynthetic benchmarks the config's model on weights generated in
// memory while the devices bind them (seed: -seed).
func runSynthetic(o *options) error {
	p, cfg, err := synthPlan(o)
	if err != nil {
		return err
	}
	o.backend = engine.PlanBackend(p, o.backend)
	src, err := synth.NewSource(cfg, o.seed, synth.Options{})
	if err != nil {
		return err
	}
	t0 := time.Now()
	model, err := engine.OpenSource(p.Module, src, o.backend)
	if err != nil {
		return err
	}
	defer model.Close()
	if err := checkUnread(o.backend); err != nil {
		return err
	}
	b, d := src.Generated()
	open := time.Since(t0).Seconds()
	fmt.Fprintf(os.Stderr, "synthetic weights: %s generated in %.1fs (%.2f GB/s, %d threads), opened with binding in %.1fs\n",
		engine.FormatBytes(b), d.Seconds(), float64(b)/1e9/max(d.Seconds(), 1e-9), runtime.GOMAXPROCS(0), open)
	if err := checkOutputs(*o); err != nil {
		return err
	}
	return runBench(&o.bench, model, 1, o.maxMemory, o.synth.floorGBs, func(r *bench.Report) {
		r.SyntheticBytes, r.SyntheticSeconds, r.OpenSeconds = b, d.Seconds(), open
	})
}
