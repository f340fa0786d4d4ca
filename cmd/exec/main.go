package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/cpu"
	_ "github.com/ds4go/ds4/backends/cuda"
	_ "github.com/ds4go/ds4/backends/gorgonia"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/plan"
)

func main() { cli.Main("exec", func(args []string) error { return asInternal(run(args)) }) }

// asInternal marks an engine's recovered panic as an internal error (exit 1).
func asInternal(err error) error {
	var ie *engine.InternalError
	if errors.As(err, &ie) {
		return &cli.Internal{Err: err}
	}
	return err
}

type options struct {
	plan, model, prompt, dump, traceOut, traceIn, backend string
	maxNew, maxLen, prefillChunk                          int
	fullRows                                              bool // -full-rows
	temperature                                           float64
	seed                                                  uint64
	maxMemory                                             int64
	listBackends, placement                               bool
	bench                                                 benchOptions // cmd/exec/bench.go
	synth                                                 synthOptions // cmd/exec/synthetic.go
	text                                                  textOptions  // cmd/exec/text.go
}

// usage is the synopsis of -h: every flag appears in it (TestUsageNamesEveryFlag).
const usage = `exec -plan FILE [-model DIR] (-prompt TEXT | -prompt-file FILE) [-tokenizer FILE] [-max-new-tokens N] [-max-len N]
            [-prefill-chunk N] [-full-rows] [-temperature T [-seed S] [-top-k K] [-top-p P]] [-stop S,...] [-backend NAME] [-max-memory BYTES] [-cpuprofile FILE]
       exec -plan FILE [-model DIR] -chat [-system TEXT] [-thinking] [-tokenizer FILE] [-max-new-tokens N] [-max-len N] [-prefill-chunk N]
            [-temperature T [-seed S] [-top-k K] [-top-p P]] [-stop S,...] [-backend NAME] [-max-memory BYTES]
       exec -plan FILE [-model DIR] (-prompt-ids "1,2,3;4,5,6" | -trace-in FILE) [-max-new-tokens N] [-max-len N] [-prefill-chunk N]
            [-temperature T [-seed S] [-top-k K] [-top-p P]] [-dump FILE] [-trace-out FILE] [-backend NAME] [-max-memory BYTES] [-cpuprofile FILE]
       exec -plan FILE [-model DIR] -bench [-json] [-bench-prefill LIST] [-bench-long LIST] [-prefill-chunk N] [-full-rows] [-bench-context N] [-bench-decode N]
            [-bench-repeats N] [-probe-mb N] [-op-times] [-layer-times] [-bench-floor-gbs GBS] [-backend NAME] [-backend-opt KEY=VALUE ...]
            [-cuda-graphs] [-max-memory BYTES] [-cpuprofile FILE]
       exec [-plan FILE] -bench -synthetic -config FILE [-seed N] [the -bench flags above]
       exec -plan FILE -placement [-backend NAME] [-max-len N]
       exec -list-backends`

// newFlags registers every flag of exec into o.
func newFlags(o *options) *flag.FlagSet {
	fs := cli.NewFlagSet("exec", usage)
	fs.StringVar(&o.plan, "plan", "", "plan file written by compile (required)")
	fs.StringVar(&o.model, "model", "", "checkpoint directory (default: the one recorded in the plan)")
	fs.StringVar(&o.prompt, "prompt-ids", "", "token ids: rows separated by ';', ids by ','; all rows the same length")
	fs.IntVar(&o.maxNew, "max-new-tokens", 8, "tokens to generate per row")
	fs.IntVar(&o.maxLen, "max-len", 0, "maximum sequence length that sizes the caches (default: prompt + new tokens)")
	fs.IntVar(&o.prefillChunk, "prefill-chunk", engine.DefaultPrefillChunk, "prefill a longer prompt in calls of at most `N` tokens (memory of a chunk, not of the prompt; the same results); 0: one call")
	fs.BoolVar(&o.fullRows, "full-rows", false, "compute every layer on every prompt row (bounded replay off: by default a prompt whose last logits alone are wanted runs the layers after the last one whose caches later layers read on the last token's window cone only, with the same results)")
	fs.Float64Var(&o.temperature, "temperature", 0, "sampling temperature; 0 = greedy")
	fs.Uint64Var(&o.seed, "seed", 1, "sampling seed")
	fs.StringVar(&o.dump, "dump", "", "write logits and ids to this safetensors file")
	fs.StringVar(&o.traceOut, "trace-out", "", "write every block's tensors under the golden naming (docs/trace-format.md)")
	fs.StringVar(&o.traceIn, "trace-in", "", "teacher-force from a trace/golden file: its prompt, decode tokens, block inputs and pre mixes")
	fs.StringVar(&o.backend, "backend", "", "backend to run on (default: the one the plan records, from compile -backend)")
	fs.Func("max-memory", "refuse a session needing more than `BYTES` bytes (e.g. 512M, 8G; default: MemAvailable)", func(v string) (err error) {
		o.maxMemory, err = engine.ParseBytes(v)
		if err == nil && o.maxMemory == 0 {
			err = fmt.Errorf("must be > 0")
		}
		return err
	})
	fs.BoolVar(&o.listBackends, "list-backends", false, "print every registered backend and, for those that cannot run here, why")
	fs.BoolVar(&o.placement, "placement", false, "print which backend runs each op of the plan's graphs, the segments and the bytes crossing per call, and run nothing")
	o.bench.register(fs)
	o.synth.register(fs)
	o.text.register(fs)
	return fs
}

func run(args []string) error {
	var o options
	fs := newFlags(&o)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	set := cli.Visited(fs)
	if o.listBackends {
		return listBackends(set)
	}
	if err := o.check(set); err != nil {
		return err
	}
	o.bench.prefillChunk = o.prefillChunk
	o.bench.fullRows = o.fullRows
	bopts, err := o.synth.options(set)
	if err != nil {
		return err
	}
	backends.SetOptions(bopts)
	if o.synth.on {
		stopProfile, err := o.bench.startProfile()
		if err != nil {
			return err
		}
		defer stopProfile()
		return runSynthetic(&o)
	}
	p, err := plan.Read(o.plan)
	if err != nil {
		return err
	}
	if o.placement {
		return printPlacement(p, engine.PlanBackend(p, o.backend), o.maxLen)
	}
	md := modelDir{path: o.model}
	if md.path == "" {
		md = modelDir{path: p.ModelDir, plan: o.plan}
	}
	dir := md.path
	if dir == "" {
		return fmt.Errorf("plan %s was compiled shape-only: give -model DIR", o.plan)
	}
	if _, err := engine.CheckPlan(p, dir); err != nil {
		return md.wrap(err)
	}
	o.backend = engine.PlanBackend(p, o.backend)
	stopProfile, err := o.bench.startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	if o.bench.on {
		model, err := engine.Open(p.Module, dir, o.backend)
		if err != nil {
			return md.wrap(err)
		}
		defer model.Close()
		if err := checkUnread(o.backend); err != nil {
			return err
		}
		if err := checkOutputs(o); err != nil {
			return err
		}
		return runBench(&o.bench, model, 1, o.maxMemory, o.synth.floorGBs, nil)
	}
	if o.text.on(set) {
		return runText(&o, p, md)
	}

	var teacher *safetensors.File
	var prompt, forced [][]int64
	if o.traceIn != "" {
		if teacher, err = safetensors.Open(o.traceIn); err != nil {
			return err
		}
		defer teacher.Close()
		if prompt, err = idsOf(teacher, "inputs.input_ids"); err != nil {
			return err
		}
		// Only an absent tensor means no teacher forcing: one of the wrong
		// dtype or shape is an error, not forcing silently off.
		if _, ok := teacher.Get("inputs.decode_input_ids"); ok {
			if forced, err = idsOf(teacher, "inputs.decode_input_ids"); err != nil {
				return err
			}
			if len(forced) != len(prompt) {
				return fmt.Errorf("%s: tensor \"inputs.decode_input_ids\" has %d rows, inputs.input_ids %d", o.traceIn, len(forced), len(prompt))
			}
			if set["max-new-tokens"] {
				return fmt.Errorf("-max-new-tokens has no effect with -trace-in %s (its inputs.decode_input_ids set the decode steps)", o.traceIn)
			}
			o.maxNew = len(forced[0]) + 1
		}
	} else {
		if o.prompt == "" {
			return fmt.Errorf("give -prompt TEXT, -prompt-file FILE, -chat, -prompt-ids IDS or -trace-in FILE")
		}
		if prompt, err = ParsePrompt(o.prompt); err != nil {
			return fmt.Errorf("-prompt-ids: %v", err)
		}
	}
	S := len(prompt[0])
	if o.maxLen == 0 {
		o.maxLen = S + o.maxNew
	}
	if S+o.maxNew > o.maxLen {
		return fmt.Errorf("prompt of %d tokens + %d new tokens exceeds -max-len %d", S, o.maxNew, o.maxLen)
	}
	if p.MaxBatch > 0 && len(prompt) > p.MaxBatch {
		return fmt.Errorf("batch of %d rows exceeds the plan's max_batch %d (recompile with a larger -max-batch)", len(prompt), p.MaxBatch)
	}

	model, err := engine.Open(p.Module, dir, o.backend)
	if err != nil {
		return md.wrap(err)
	}
	defer model.Close()
	if err := checkUnread(o.backend); err != nil {
		return err
	}
	if err := checkOutputs(o); err != nil {
		return err
	}
	chunk := o.prefillChunk
	if o.dump != "" {
		chunk = 0 // the dump holds every prompt position's logits (prefill.logits_full): one call
	}
	// a dump or a trace holds every prompt position's logits
	full := o.dump != "" || o.traceOut != "" || teacher != nil
	sess, err := model.NewSession(engine.Options{Batch: len(prompt), MaxLen: o.maxLen, PrefillLen: S, PrefillChunk: chunk, FullLogits: full, FullRows: o.fullRows, MaxMemory: o.maxMemory})
	if err != nil {
		return err
	}
	defer sess.Close()
	if o.traceOut != "" || teacher != nil {
		sess.Tracer = engine.NewTracer(o.traceOut != "", teacher)
	}
	var dumps []safetensors.WriteTensor
	keep := func(call string, lg *engine.Logits) {
		if call == "prefill" {
			dumps = append(dumps, safetensors.WriteTensor{Name: "prefill.logits_full", DType: "F32", Shape: []int{lg.B, lg.S, lg.V}, Data: safetensors.F32Bytes(lg.Data)})
			return
		}
		flat := make([]float32, 0, lg.B*lg.V)
		for _, r := range lg.Last() {
			flat = append(flat, r...)
		}
		dumps = append(dumps, safetensors.WriteTensor{Name: call + ".logits", DType: "F32", Shape: []int{lg.B, lg.V}, Data: safetensors.F32Bytes(flat)})
	}
	res, err := sess.Generate(prompt, engine.GenerateOptions{MaxNew: o.maxNew, Sampling: o.sampling(), Seed: o.seed, Forced: forced, Logits: keep})
	if err != nil {
		return err
	}
	gen := res.IDs

	for b := range gen {
		fmt.Printf("row %d: %s\n", b, joinIDs(gen[b]))
	}

	if o.dump != "" {
		all := make([]int32, 0)
		for b := range prompt {
			for _, v := range append(append([]int64(nil), prompt[b]...), gen[b]...) {
				all = append(all, int32(v))
			}
		}
		dumps = append(dumps, safetensors.WriteTensor{Name: "ids", DType: "I32", Shape: []int{len(prompt), S + len(gen[0])}, Data: safetensors.I32Bytes(all)})
		if err := safetensors.WriteFile(o.dump, dumps, map[string]string{"format": "ds4 dump v1"}); err != nil {
			return fmt.Errorf("-dump %v", err)
		}
	}
	if o.traceOut != "" {
		sess.Tracer.Put("inputs.input_ids", prompt)
		sess.Tracer.Put("inputs.generated_ids", gen)
		if err := sess.Tracer.Write(o.traceOut); err != nil {
			return fmt.Errorf("-trace-out %v", err)
		}
	}
	printTimes(len(prompt), S, res.DecodeSteps, res.Prefill, res.Decode)
	return nil
}

// checkOutputs refuses, before the run, an output that is a directory, a
// FIFO or one of the files read: the plan, the checkpoint's files, the
// -trace-in file (internal/fileio). The CPU profile, begun before the
// checkpoint was opened, is checked again here.
func checkOutputs(o options) error {
	for _, out := range []struct{ flag, path string }{{"-dump", o.dump}, {"-trace-out", o.traceOut}, {"-cpuprofile", o.bench.cpuProfile}} {
		if out.path == "" {
			continue
		}
		if err := fileio.CheckOutput(out.path); err != nil {
			return fmt.Errorf("%s %v", out.flag, err)
		}
	}
	return nil
}

// printTimes reports the speed of the run on stderr (stdout holds only the
// results, the rows of ids).
func printTimes(rows, S, decodeSteps int, prefill, decode time.Duration) {
	fmt.Fprintf(os.Stderr, "prefill: %d tokens in %.3fs (%.1f tokens/s)\n", rows*S, prefill.Seconds(), float64(rows*S)/prefill.Seconds())
	if decodeSteps > 0 {
		fmt.Fprintf(os.Stderr, "decode: %d steps × %d rows in %.3fs (%.1f tokens/s)\n", decodeSteps, rows, decode.Seconds(), float64(decodeSteps*rows)/decode.Seconds())
	}
}

// modelDir is the checkpoint directory and, when it came from the plan
// (no -model), the plan that recorded it.
type modelDir struct{ path, plan string }

// wrap says, in an error about the directory, that the path came from the
// plan: the checkpoint may have moved since the compile.
func (d modelDir) wrap(err error) error {
	if d.plan == "" || err == nil || !strings.Contains(err.Error(), d.path) {
		return err
	}
	return fmt.Errorf("model directory %s recorded in plan %s (compiled there; give -model DIR if it moved): %w", d.path, d.plan, err)
}

// ParsePrompt parses "1,2,3;4,5,6" into equal-length rows.
func ParsePrompt(s string) ([][]int64, error) {
	var rows [][]int64
	for i, r := range strings.Split(s, ";") {
		r = strings.TrimSpace(r)
		if r == "" {
			return nil, fmt.Errorf("row %d is empty", i)
		}
		var row []int64
		for _, f := range strings.Split(r, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil || strings.HasPrefix(strings.TrimSpace(f), "+") {
				return nil, fmt.Errorf("row %d: %q is not a token id", i, strings.TrimSpace(f))
			}
			row = append(row, v)
		}
		if len(rows) > 0 && len(row) != len(rows[0]) {
			return nil, fmt.Errorf("row %d has %d ids, row 0 has %d (rows must have equal length)", i, len(row), len(rows[0]))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// idsOf reads token ids [rows, tokens] of a trace file (engine.TraceIDs
// refuses an empty, 1-D or non-integer tensor, naming it).
func idsOf(f *safetensors.File, name string) ([][]int64, error) { return engine.TraceIDs(f, name) }

func joinIDs(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}
