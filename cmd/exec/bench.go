package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/engine"
)

// benchOptions are the flags of exec -bench.
type benchOptions struct {
	on, json, opTimes    bool
	prefill              string
	context, steps, reps int
	probeMB              int64
	cpuProfile           string
}

func (b *benchOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&b.on, "bench", false, "benchmark the plan with random prompts: prefill and decode throughput, weight bytes per decoded token, memory bandwidth probe, RSS")
	fs.BoolVar(&b.json, "json", false, "with -bench: print the report as one JSON object")
	fs.StringVar(&b.prefill, "bench-prefill", "1,128,1024", "with -bench: prompt lengths to time, comma-separated")
	fs.IntVar(&b.context, "bench-context", 128, "with -bench: prompt length before the timed decode steps")
	fs.IntVar(&b.steps, "bench-decode", 16, "with -bench: timed decode steps")
	fs.IntVar(&b.reps, "bench-repeats", 2, "with -bench: runs of each prefill length (the best is reported)")
	fs.Int64Var(&b.probeMB, "probe-mb", 1024, "with -bench: bandwidth probe buffer in MiB (0 = no probe)")
	fs.BoolVar(&b.opTimes, "op-times", false, "with -bench: report the kernel time per token of each op (prefill and decode) (adds a clock read per kernel)")
	fs.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (or of the benchmark) to this file")
}

// startProfile starts the CPU profile if asked and returns its stop function.
func (b *benchOptions) startProfile() (func(), error) {
	if b.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(b.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %v", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runBench runs engine.Bench on an opened model and prints the report.
func runBench(b *benchOptions, model *engine.Model, batch int, maxMemory int64) error {
	var lens []int
	for _, f := range strings.Split(b.prefill, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return fmt.Errorf("-bench-prefill: %q is not a positive length", f)
		}
		lens = append(lens, v)
	}
	if b.context <= 0 || b.steps <= 0 || b.reps <= 0 || b.probeMB < 0 {
		return fmt.Errorf("-bench-context, -bench-decode and -bench-repeats must be > 0, -probe-mb ≥ 0")
	}
	opt := engine.BenchOptions{PrefillTokens: lens, Batch: batch, DecodeContext: b.context, DecodeSteps: b.steps,
		Repeats: b.reps, ProbeBytes: b.probeMB << 20, Seed: 1, MaxMemory: maxMemory, OpTimes: b.opTimes}
	if b.probeMB == 0 {
		opt.ProbeBytes = -1
	}
	if opt.PrefillTokens == nil {
		opt.PrefillTokens = []int{}
	}
	if !b.json {
		opt.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	rep, err := model.Bench(opt)
	if err != nil {
		return err
	}
	if b.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Print(rep.Text())
	return nil
}
