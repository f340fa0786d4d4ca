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
	"github.com/ds4go/ds4/engine/bench"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/internal/fileio"
)

// benchOptions are the flags of exec -bench.
type benchOptions struct {
	on, json, opTimes    bool
	layerTimes           bool
	prefill, long        string
	lens, longLens       []int // prefill and long parsed by check
	prefillChunk         int   // -prefill-chunk (options.prefillChunk)
	fullRows             bool  // -full-rows
	context, steps, reps int
	probeMB              int64
	cpuProfile           string
}

// maxRepeats bounds -bench-repeats: each repeat is a whole prefill of every
// length, and the best of a few is what is reported.
const maxRepeats = 1000

func (b *benchOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&b.on, "bench", false, "benchmark the plan with random prompts: prefill and decode throughput, weight bytes per decoded token, memory bandwidth probe, RSS")
	fs.BoolVar(&b.json, "json", false, "with -bench: print the report as one JSON object")
	fs.StringVar(&b.prefill, "bench-prefill", "1,128,1024", "with -bench: prompt lengths to time, comma-separated")
	fs.StringVar(&b.long, "bench-long", "", "with -bench: long-context rows, prompt lengths comma-separated (e.g. 8192,32768,65536): a prefill in chunks of -prefill-chunk, then -bench-decode steps after it, with peak RSS")
	fs.IntVar(&b.context, "bench-context", 128, "with -bench: prompt length before the timed decode steps")
	fs.IntVar(&b.steps, "bench-decode", 16, "with -bench: timed decode steps")
	fs.IntVar(&b.reps, "bench-repeats", 2, "with -bench: runs of each prefill length (the best is reported)")
	fs.Int64Var(&b.probeMB, "probe-mb", 1024, "with -bench: bandwidth probe buffer in MiB (0 = no probe)")
	fs.BoolVar(&b.opTimes, "op-times", false, "with -bench: report the kernel time per token of each op (prefill and decode) (adds a clock read per kernel)")
	fs.BoolVar(&b.layerTimes, "layer-times", false, "with -bench: report the decode kernel time per token of each layer (backends that time nodes: the host ones and cuda; cuda then runs the timed steps without graphs)")
	fs.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (or of the benchmark) to this file")
}

// startProfile starts the CPU profile if asked and returns its stop function.
func (b *benchOptions) startProfile() (func(), error) {
	if b.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := fileio.Create(b.cpuProfile) // never onto an input, a directory or a FIFO
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, fmt.Errorf("-cpuprofile: %v", err)
	}
	return func() { pprof.StopCPUProfile(); f.Commit() }, nil
}

// check parses -bench-prefill and refuses values out of range (the memory
// the sessions and the probe need is checked by bench.Run before it
// allocates anything).
func (b *benchOptions) check() error {
	var err error
	if b.lens, err = lengths("bench-prefill", b.prefill); err != nil {
		return err
	}
	if b.longLens, err = lengths("bench-long", b.long); err != nil {
		return err
	}
	for _, err := range []error{
		cli.IntRange("bench-context", int64(b.context), 1, maxTokens, maxTokensWhy),
		cli.IntRange("bench-decode", int64(b.steps), 1, maxTokens, maxTokensWhy),
		cli.IntRange("bench-repeats", int64(b.reps), 1, maxRepeats, "the best of a few repeats is reported"),
		// 2^30 MiB = 1 PiB: the shift to bytes stays far from overflow;
		// bench.Run refuses a probe larger than the memory available.
		cli.IntRange("probe-mb", b.probeMB, 0, 1<<30, "1 PiB"),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// lengths parses a comma-separated list of prompt lengths of flag name.
func lengths(name, list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 || v > maxTokens || strings.HasPrefix(f, "+") {
			return nil, fmt.Errorf("-%s: %q is not a length in 1..%d", name, f, maxTokens)
		}
		out = append(out, v)
	}
	return out, nil
}

// runBench runs bench.Run on an opened model and prints the report.
// floorGBs is -bench-floor-gbs (0: the device's probe); fill, when not
// nil, adds the caller's figures to the report.
func runBench(b *benchOptions, model *engine.Model, batch int, maxMemory int64, floorGBs float64, fill func(*bench.Report)) error {
	opt := bench.Options{PrefillTokens: b.lens, Batch: batch, DecodeContext: b.context, DecodeSteps: b.steps,
		Repeats: b.reps, ProbeBytes: b.probeMB << 20, Seed: 1, MaxMemory: maxMemory, OpTimes: b.opTimes, LayerTimes: b.layerTimes, FloorBytesPerS: floorGBs * 1e9,
		PrefillChunk: b.prefillChunk, FullRows: b.fullRows, LongContext: b.longLens}
	if b.probeMB == 0 {
		opt.ProbeBytes = -1
	}
	if opt.PrefillTokens == nil {
		opt.PrefillTokens = []int{}
	}
	if !b.json {
		opt.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	rep, err := bench.Run(model, opt)
	if err != nil {
		return err
	}
	if fill != nil {
		fill(rep)
	}
	if b.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Print(rep.Text())
	return nil
}
