package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
)

// Options configure Run. Zero values take the defaults.
type Options struct {
	PrefillTokens []int // prompt lengths to time (default 1, 128, 1024)
	Batch         int   // rows per call (default 1)
	DecodeContext int   // prompt length before the timed decode steps (default 128)
	DecodeSteps   int   // timed decode steps (default 16)
	DecodeWarmup  int   // untimed decode steps before them (default 2)
	Repeats       int   // prefill runs per length, the best is kept (default 2)
	ProbeBytes    int64 // bandwidth probe buffer (default 1 GiB; < 0 skips the probe)
	ProbePasses   int   // probe passes, the best is kept (default 5)
	Seed          uint64
	MaxMemory     int64 // Options.MaxMemory of the sessions
	PrefillChunk  int   // Options.PrefillChunk of the sessions (0: one prefill call)
	FullRows      bool  // Options.FullRows of the sessions (bounded replay off)
	// LongContext are the prompt lengths of the long-context rows: one
	// prefill each (in chunks of PrefillChunk), then DecodeSteps timed
	// decode steps after it (Report.Long).
	LongContext []int
	OpTimes     bool // time every kernel of the decode steps, by op (costs a clock read per node)
	LayerTimes  bool // time the decode steps' kernels by layer (Session.NodeTimes)
	// FloorBytesPerS is the bandwidth of the weight-bandwidth floor decode
	// is measured against (e.g. 4.3e12 for an H200); 0 uses the device's
	// own probe (a backends.Profiler), else the host probe.
	FloorBytesPerS float64
	// GEMMSeconds bounds the timing of the CPU GEMM kernel on its own
	// (host backends; Report.GEMM): default 0.5 s, < 0 skips it.
	GEMMSeconds float64
	// Log, when set, receives one line per finished measurement.
	Log func(format string, args ...any)
}

func (o *Options) defaults() {
	if o.PrefillTokens == nil {
		o.PrefillTokens = []int{1, 128, 1024}
	}
	if o.Batch <= 0 {
		o.Batch = 1
	}
	if o.DecodeContext <= 0 {
		o.DecodeContext = 128
	}
	if o.DecodeSteps <= 0 {
		o.DecodeSteps = 16
	}
	if o.DecodeWarmup < 0 {
		o.DecodeWarmup = 0
	} else if o.DecodeWarmup == 0 {
		o.DecodeWarmup = 2
	}
	if o.Repeats <= 0 {
		o.Repeats = 2
	}
	if o.ProbeBytes == 0 {
		o.ProbeBytes = 1 << 30
	}
	if o.ProbePasses <= 0 {
		o.ProbePasses = 5
	}
	if o.GEMMSeconds == 0 {
		o.GEMMSeconds = 0.5
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// PrefillFigure is one timed prefill call.
type PrefillFigure struct {
	Tokens     int     `json:"tokens"` // tokens per row
	Batch      int     `json:"batch"`
	Seconds    float64 `json:"seconds"` // best of the repeats
	TokensPerS float64 `json:"tokens_per_s"`
	// FLOPs of the call: 2·M·N·K over the matmul-like nodes (weight matmuls,
	// the chosen experts, hc mixes, indexer scores, attention QK and PV over
	// every index slot).
	FLOPs       float64 `json:"flops"`
	WeightFLOPs float64 `json:"weight_flops"` // the part from weight matmuls
	GFLOPS      float64 `json:"gflops"`       // FLOPs / Seconds / 1e9
	// OpTimes (with Options.OpTimes) is the kernel wall time of the
	// best run by op, longest first (MsPerToken: per prompt token).
	OpTimes []OpTimeFigure `json:"op_times,omitempty"`
	// KernelsPerToken (devices that are a backends.Profiler) is the
	// kernels the best run launched or replayed, per prompt token.
	KernelsPerToken float64 `json:"kernels_per_token,omitempty"`
	// GEMMFraction (host backends) is GFLOPS / Report.GEMM.GFLOPS: how
	// close the whole prefill comes to the GEMM kernel alone.
	GEMMFraction float64 `json:"gemm_fraction,omitempty"`
}

// LongFigure is one long-context row: a prompt's prefill (in chunks) and
// the decode steps after it, with the memory the process held.
type LongFigure struct {
	Tokens   int  `json:"tokens"` // prompt tokens per row
	Batch    int  `json:"batch"`
	Chunk    int  `json:"prefill_chunk"` // the chunk it ran in (Options.ChunkSize; 0: one call)
	FullRows bool `json:"full_rows"`     // Options.FullRows (bounded replay off)
	// LogitsDigest and StateDigest hash the prompt's last logits and every
	// state after it (engine.FloatDigest, Session.StateDigest),
	// DecodeDigest the decode steps' logits: runs with the same digests
	// computed the same bits.
	LogitsDigest      string  `json:"logits_digest"`
	StateDigest       string  `json:"state_digest"`
	DecodeDigest      string  `json:"decode_digest"`
	PrefillSeconds    float64 `json:"prefill_seconds"`
	PrefillTokensPerS float64 `json:"prefill_tokens_per_s"`
	DecodeSteps       int     `json:"decode_steps"`
	DecodeTokensPerS  float64 `json:"decode_tokens_per_s"`
	// CacheBytes is the session's persistent state (caches, compressor
	// state, Engram history) and ArenaBytes its activation arenas.
	CacheBytes int64 `json:"cache_bytes"`
	ArenaBytes int64 `json:"arena_bytes"`
	// BaseRSS is VmRSS before the row (the model: weights as held), PeakRSS
	// VmHWM over the row (reset before it where the kernel allows:
	// /proc/self/clear_refs), RSSFile the mapped checkpoint pages after it.
	BaseRSS int64 `json:"base_rss_bytes"`
	PeakRSS int64 `json:"peak_rss_bytes"`
	RSSFile int64 `json:"rss_file_bytes"`
}

// Report holds the figures of one Bench run (JSON field names are
// stable: cmd/exec -bench -json prints this object).
type Report struct {
	Backend    string `json:"backend"`
	Threads    int    `json:"threads"`          // GOMAXPROCS
	KernelISA  string `json:"kernel_isa"`       // the device and its kernels (Device.Describe)
	Checkpoint int64  `json:"checkpoint_bytes"` // size of the checkpoint files
	// Synthetic weights (exec -synthetic; set by the caller): the bytes
	// generated in memory, the wall time generating them, and the time
	// Open took (generation and binding on the device).
	SyntheticBytes   int64   `json:"synthetic_bytes,omitempty"`
	SyntheticSeconds float64 `json:"synthetic_gen_seconds,omitempty"`
	OpenSeconds      float64 `json:"open_seconds,omitempty"`

	Prefill []PrefillFigure `json:"prefill"`
	// Long are the long-context rows (Options.LongContext).
	Long []LongFigure `json:"long_context,omitempty"`
	// GEMM (host backends; absent else) is the CPU GEMM kernel's own rate
	// measured in this run, after the prefills.
	GEMM *GEMMFigure `json:"gemm,omitempty"`

	DecodeContext    int     `json:"decode_context"`
	DecodeSteps      int     `json:"decode_steps"`
	DecodeSeconds    float64 `json:"decode_seconds"`
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
	DecodeFLOPs      float64 `json:"decode_flops_per_token"`

	// WeightBytesPerDecodeToken: bytes of weights, as stored in the
	// checkpoint, that one decoded token reads: every non-expert weight, the
	// experts actually chosen (distinct per layer and step, averaged), the
	// embedding row, the Engram rows and the head.
	WeightBytesPerDecodeToken float64 `json:"weight_bytes_per_decode_token"`
	// HeldBytesPerDecodeToken is the same sum over the weights as the
	// backend holds them (bf16 tensors converted to f32 at load count 4 B).
	HeldBytesPerDecodeToken float64 `json:"held_bytes_per_decode_token"`
	ExpertsPerToken         float64 `json:"experts_per_token"`      // distinct chosen experts per step, all MoE layers, per row
	ExpertBytesPerToken     float64 `json:"expert_bytes_per_token"` // their share of WeightBytesPerDecodeToken
	DecodeBytesPerS         float64 `json:"decode_bytes_per_s"`     // WeightBytesPerDecodeToken × decode tokens/s

	ProbeBytes        int64   `json:"probe_buffer_bytes"`
	ProbeBytesPerS    float64 `json:"probe_bytes_per_s"`
	BandwidthFraction float64 `json:"bandwidth_fraction"` // DecodeBytesPerS / ProbeBytesPerS
	// FloorTokensPerS is the bandwidth floor: ProbeBytesPerS / WeightBytesPerDecodeToken.
	FloorTokensPerS float64 `json:"floor_tokens_per_s"`

	// DecodeOpTimes (with Options.OpTimes) is the kernel wall time per
	// decoded token by op, longest first.
	DecodeOpTimes []OpTimeFigure `json:"decode_op_times,omitempty"`

	// DecodeLayerTimes (with Options.LayerTimes, on devices that fill
	// Env.NodeTimes) is the kernel time per decoded token by layer.
	DecodeLayerTimes []LayerTimeFigure `json:"decode_layer_times,omitempty"`

	// Device figures (devices that are a backends.Profiler; absent else).
	Device *DeviceFigures `json:"device,omitempty"`
	// HBMBandwidth is the device's own bandwidth probe in GB/s (10^9 B/s),
	// measured in this run over ProbeBytes (Profiler.ProbeBandwidth).
	HBMBandwidth float64 `json:"hbm_bandwidth,omitempty"`

	RSS     int64 `json:"rss_bytes"`      // VmRSS after the decode steps
	RSSAnon int64 `json:"rss_anon_bytes"` // RssAnon (heap: converted weights, caches, activations)
	RSSFile int64 `json:"rss_file_bytes"` // RssFile (mapped checkpoint pages)
	PeakRSS int64 `json:"peak_rss_bytes"` // VmHWM
	// FileHuge is the part of RSSFile mapped by 2 MiB pages (FilePmdMapped
	// of /proc/self/smaps_rollup; see internal/safetensors.mapFile).
	FileHuge int64 `json:"rss_file_huge_bytes"`
}

// DeviceFigures are what a backends.Profiler device reports of the timed
// decode steps: its launch counters per step and decode's weight bandwidth
// as a fraction of its probe and of the floor bandwidth.
type DeviceFigures struct {
	ProbeBytes int64   `json:"probe_buffer_bytes"`
	ProbeGBs   float64 `json:"probe_gb_per_s"` // = Report.HBMBandwidth
	// ProbeFraction is Report.DecodeBytesPerS / the device probe.
	ProbeFraction float64 `json:"probe_fraction"`
	// FloorGBs is the floor's bandwidth (Options.FloorBytesPerS, else the
	// probe); FloorFraction is decode's share of it, FloorTokensPerS the
	// decode rate at it (every weight read once per token at that rate).
	FloorGBs        float64 `json:"floor_gb_per_s"`
	FloorFraction   float64 `json:"floor_fraction"`
	FloorTokensPerS float64 `json:"floor_tokens_per_s"`
	// Per timed decode step (all rows): kernels run (launched or replayed),
	// host launches, graph replays and captures (Profiler.Counters deltas).
	KernelsPerStep       float64 `json:"kernels_per_decode_step"`
	LaunchesPerStep      float64 `json:"launches_per_decode_step"`
	GraphReplaysPerStep  float64 `json:"graph_replays_per_decode_step"`
	GraphCapturesPerStep float64 `json:"graph_captures_per_decode_step"`
}

// OpTimeFigure is the time one op's kernels took per decoded token.
type OpTimeFigure struct {
	Op            string  `json:"op"`
	CallsPerToken float64 `json:"calls_per_token"`
	MsPerToken    float64 `json:"ms_per_token"`
	Share         float64 `json:"share"` // of the decode wall time
}

// opTimeFigures turns a session's op times into figures per token, longest
// first (nil when nothing was timed).
func opTimeFigures(times map[string]*backends.OpTime, tokens, seconds float64) []OpTimeFigure {
	var figs []OpTimeFigure
	for op, t := range times {
		figs = append(figs, OpTimeFigure{Op: op, CallsPerToken: float64(t.Calls) / tokens,
			MsPerToken: float64(t.Nanos) / 1e6 / tokens, Share: float64(t.Nanos) / 1e9 / seconds})
	}
	sort.Slice(figs, func(i, j int) bool { return figs[i].MsPerToken > figs[j].MsPerToken })
	return figs
}

// Run measures the model with random prompts (no output is checked).
// Before it allocates anything it checks the memory of every session it
// will open and of the bandwidth probe (preflight).
func Run(m *engine.Model, opt Options) (*Report, error) {
	opt.defaults()
	if err := preflight(m, opt); err != nil {
		return nil, err
	}
	rep := &Report{Backend: m.Placement.Primary, Threads: runtime.GOMAXPROCS(0), KernelISA: m.Device().Describe(),
		Checkpoint: m.CheckpointBytes(), DecodeContext: opt.DecodeContext, DecodeSteps: opt.DecodeSteps}
	rng := rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x5851f42d4c957f2d))
	prompt := func(S int) [][]int64 {
		rows := make([][]int64, opt.Batch)
		for b := range rows {
			rows[b] = make([]int64, S)
			for t := range rows[b] {
				rows[b][t] = int64(rng.IntN(max(m.Vocab, 1)))
			}
		}
		return rows
	}

	for _, S := range opt.PrefillTokens {
		if S <= 0 {
			return nil, fmt.Errorf("prefill length %d: must be > 0", S)
		}
		fig := PrefillFigure{Tokens: S, Batch: opt.Batch}
		env := ir.Bindings{B: int64(opt.Batch), S: int64(S), M: int64(S), P: 0}
		fig.FLOPs, fig.WeightFLOPs = graphFLOPs(m.PrefillGraph(), env)
		for r := 0; r < opt.Repeats; r++ {
			s, err := m.NewSession(engine.Options{Batch: opt.Batch, MaxLen: S, PrefillLen: S, PrefillChunk: opt.PrefillChunk, FullRows: opt.FullRows, MaxMemory: opt.MaxMemory})
			if err != nil {
				return nil, err
			}
			p := prompt(S)
			if opt.OpTimes {
				s.OpTimes = map[string]*backends.OpTime{}
			}
			c0 := counters(m)
			t0 := time.Now()
			if _, err := s.Prefill(p); err != nil {
				return nil, err
			}
			if d := time.Since(t0).Seconds(); r == 0 || d < fig.Seconds {
				fig.Seconds = d
				fig.OpTimes = opTimeFigures(s.OpTimes, float64(S*opt.Batch), d)
				if c0 != nil {
					fig.KernelsPerToken = float64(counters(m).Kernels-c0.Kernels) / float64(S*opt.Batch)
				}
			}
			s.Close()
		}
		fig.TokensPerS = float64(S*opt.Batch) / fig.Seconds
		fig.GFLOPS = fig.FLOPs / fig.Seconds / 1e9
		rep.Prefill = append(rep.Prefill, fig)
		opt.Log("prefill %5d tokens: %8.3f s  %9.1f tokens/s  %7.1f GFLOP/s", S, fig.Seconds, fig.TokensPerS, fig.GFLOPS)
		runtime.GC()
	}

	for _, S := range opt.LongContext {
		f, err := longRow(m, opt, S, prompt(S))
		if err != nil {
			return nil, err
		}
		rep.Long = append(rep.Long, f)
		opt.Log("long context %6d tokens: prefill %8.2f s  %8.1f tokens/s; decode after it %7.2f tokens/s; RSS %s before, peak %s (caches %s, arenas %s)",
			S, f.PrefillSeconds, f.PrefillTokensPerS, f.DecodeTokensPerS, engine.FormatBytes(f.BaseRSS), engine.FormatBytes(f.PeakRSS), engine.FormatBytes(f.CacheBytes), engine.FormatBytes(f.ArenaBytes))
		runtime.GC()
	}

	gemmFigures(m, opt, rep)
	runtime.GC()

	if err := decode(m, opt, rep, prompt(opt.DecodeContext)); err != nil {
		return nil, err
	}
	opt.Log("decode after %d tokens: %d steps %.3f s  %.2f tokens/s  %s weights/token (%s as held)", opt.DecodeContext,
		opt.DecodeSteps, rep.DecodeSeconds, rep.DecodeTokensPerS, engine.FormatBytes(int64(rep.WeightBytesPerDecodeToken)), engine.FormatBytes(int64(rep.HeldBytesPerDecodeToken)))

	if opt.ProbeBytes > 0 {
		rep.ProbeBytes = opt.ProbeBytes
		rep.ProbeBytesPerS = ProbeBandwidth(opt.ProbeBytes, opt.ProbePasses)
		rep.BandwidthFraction = rep.DecodeBytesPerS / rep.ProbeBytesPerS
		rep.FloorTokensPerS = rep.ProbeBytesPerS / rep.WeightBytesPerDecodeToken
		opt.Log("bandwidth probe: %.2f GB/s; decode reaches %.1f %% of it", rep.ProbeBytesPerS/1e9, 100*rep.BandwidthFraction)
	}
	if err := deviceFigures(m, opt, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// counters returns the primary device's launch counters, nil when it is not
// a backends.Profiler.
func counters(m *engine.Model) *backends.Counters {
	p, ok := m.Device().(backends.Profiler)
	if !ok {
		return nil
	}
	c := p.Counters()
	return &c
}

// deviceFigures probes a Profiler device's bandwidth and sets the figures
// that depend on it (the counters were set by decode).
func deviceFigures(m *engine.Model, opt Options, rep *Report) error {
	p, ok := m.Device().(backends.Profiler)
	if !ok || rep.Device == nil {
		return nil
	}
	d := rep.Device
	if opt.ProbeBytes > 0 {
		bw, err := p.ProbeBandwidth(opt.ProbeBytes)
		if err != nil {
			return fmt.Errorf("backend %s: bandwidth probe of %s: %v", rep.Backend, engine.FormatBytes(opt.ProbeBytes), err)
		}
		d.ProbeBytes, d.ProbeGBs = opt.ProbeBytes, bw/1e9
		rep.HBMBandwidth = d.ProbeGBs
		if bw > 0 {
			d.ProbeFraction = rep.DecodeBytesPerS / bw
		}
		opt.Log("device bandwidth probe: %.1f GB/s; decode reaches %.1f %% of it", d.ProbeGBs, 100*d.ProbeFraction)
	}
	floor := opt.FloorBytesPerS
	if floor <= 0 {
		floor = d.ProbeGBs * 1e9
	}
	if floor > 0 {
		d.FloorGBs = floor / 1e9
		d.FloorFraction = rep.DecodeBytesPerS / floor
		if rep.WeightBytesPerDecodeToken > 0 {
			d.FloorTokensPerS = floor / rep.WeightBytesPerDecodeToken
		}
		opt.Log("decode at %.1f %% of the %.0f GB/s floor (floor %.1f tokens/s); %.0f kernels per step",
			100*d.FloorFraction, d.FloorGBs, d.FloorTokensPerS, d.KernelsPerStep)
	}
	return nil
}

// preflight refuses, before anything is allocated, a benchmark whose
// sessions or probe buffer do not fit: each prefill length's session, the
// decode session (context + warm-up + steps), and the probe against the
// same limit as the sessions (-max-memory, else MemAvailable). The probe
// runs after the sessions are dropped, so each is checked on its own.
func preflight(m *engine.Model, opt Options) error {
	for _, S := range opt.PrefillTokens {
		if S <= 0 {
			return fmt.Errorf("prefill length %d: must be > 0", S)
		}
		if err := m.CheckMemory(engine.Options{Batch: opt.Batch, MaxLen: S, PrefillLen: S, PrefillChunk: opt.PrefillChunk, FullRows: opt.FullRows, MaxMemory: opt.MaxMemory}, "lower -bench-prefill"); err != nil {
			return fmt.Errorf("prefill of %d tokens: %v", S, err)
		}
	}
	for _, S := range opt.LongContext {
		if S <= 0 {
			return fmt.Errorf("long-context length %d: must be > 0", S)
		}
		if err := m.CheckMemory(longOptions(opt, S), "lower -bench-long or give -prefill-chunk"); err != nil {
			return fmt.Errorf("long context of %d tokens: %v", S, err)
		}
	}
	total := ir.SatAdd(ir.SatAdd(int64(opt.DecodeContext), int64(max(opt.DecodeWarmup, 0))), ir.SatAdd(2*int64(opt.DecodeSteps), 1))
	if err := m.CheckMemory(engine.Options{Batch: opt.Batch, MaxLen: int(total), PrefillLen: opt.DecodeContext, PrefillChunk: opt.PrefillChunk, FullRows: opt.FullRows, MaxMemory: opt.MaxMemory}, "lower -bench-context or -bench-decode"); err != nil {
		return fmt.Errorf("decode after %d tokens: %v", opt.DecodeContext, err)
	}
	if err := gemmPreflight(m, opt); err != nil {
		return err
	}
	if opt.ProbeBytes > 0 {
		limit, what := m.MemoryLimit(opt.MaxMemory)
		if limit > 0 && opt.ProbeBytes > limit {
			return fmt.Errorf("the bandwidth probe buffer of %d bytes (%s) is more than %s of %d bytes (%s): lower -probe-mb",
				opt.ProbeBytes, engine.FormatBytes(opt.ProbeBytes), what, limit, engine.FormatBytes(limit))
		}
	}
	return nil
}

// decode times opt.DecodeSteps greedy decode steps after a prompt and
// counts the weight bytes they read.
func decode(m *engine.Model, opt Options, rep *Report, p [][]int64) error {
	// The timed steps run with no observer (a probe callback would keep a
	// GPU from replaying its captured graph); the experts are counted over
	// as many steps after them.
	total := opt.DecodeContext + opt.DecodeWarmup + 2*opt.DecodeSteps + 1
	s, err := m.NewSession(engine.Options{Batch: opt.Batch, MaxLen: total, PrefillLen: opt.DecodeContext, PrefillChunk: opt.PrefillChunk, FullRows: opt.FullRows, MaxMemory: opt.MaxMemory})
	if err != nil {
		return err
	}
	defer s.Close()
	// Distinct experts chosen per layer, summed over the counting steps.
	chosen := map[int]int{}
	counter := &engine.Observer{
		Wants: func(name string) bool { return strings.HasSuffix(name, ".gate_indices") },
		See: func(name string, t *backends.Tensor) {
			if l, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "L"), ".gate_indices")); err == nil {
				seen := map[int64]bool{}
				for _, e := range t.I64 {
					seen[e] = true
				}
				chosen[l] += len(seen)
			}
		},
	}
	lg, err := s.Prefill(p)
	if err != nil {
		return err
	}
	next := argmaxRows(lg.Last())
	for range opt.DecodeWarmup {
		if lg, err = s.Decode(next); err != nil {
			return err
		}
		next = argmaxRows(lg.Last())
	}
	if opt.OpTimes {
		s.OpTimes = map[string]*backends.OpTime{}
	}
	if opt.LayerTimes {
		s.NodeTimes = map[*ir.Node]*backends.OpTime{}
	}
	c0 := counters(m)
	t0 := time.Now()
	for range opt.DecodeSteps {
		if lg, err = s.Decode(next); err != nil {
			return err
		}
		next = argmaxRows(lg.Last())
	}
	rep.DecodeSeconds = time.Since(t0).Seconds()
	if c0 != nil {
		c1, n := counters(m), float64(opt.DecodeSteps)
		rep.Device = &DeviceFigures{KernelsPerStep: float64(c1.Kernels-c0.Kernels) / n, LaunchesPerStep: float64(c1.Launches-c0.Launches) / n,
			GraphReplaysPerStep: float64(c1.GraphReplays-c0.GraphReplays) / n, GraphCapturesPerStep: float64(c1.GraphCaptures-c0.GraphCaptures) / n}
	}
	opTimes, nodeTimes := s.OpTimes, s.NodeTimes
	s.OpTimes, s.NodeTimes = nil, nil
	s.Observer = counter
	for range opt.DecodeSteps {
		if lg, err = s.Decode(next); err != nil {
			return err
		}
		next = argmaxRows(lg.Last())
	}
	s.Observer = nil
	tokens := float64(opt.DecodeSteps * opt.Batch)
	rep.DecodeOpTimes = opTimeFigures(opTimes, tokens, rep.DecodeSeconds)
	rep.DecodeLayerTimes = layerTimeFigures(m.Module.Graph("decode"), nodeTimes, tokens, rep.DecodeSeconds)
	rep.DecodeTokensPerS = tokens / rep.DecodeSeconds
	pos := int64(opt.DecodeContext + opt.DecodeWarmup + opt.DecodeSteps/2)
	fl, _ := graphFLOPs(m.Module.Graph("decode"), ir.Bindings{B: int64(opt.Batch), S: 1, M: int64(total), P: pos})
	rep.DecodeFLOPs = fl / float64(opt.Batch)

	wb := decodeWeightBytes(m, ir.Bindings{B: int64(opt.Batch), S: 1, M: int64(total), P: pos})
	var experts float64
	for l, n := range chosen {
		experts += float64(n)
		rep.ExpertBytesPerToken += float64(n) * float64(wb.expertStored[l])
	}
	steps := float64(opt.DecodeSteps)
	rep.ExpertsPerToken = experts / tokens
	rep.ExpertBytesPerToken /= tokens
	var heldExperts float64
	for l, n := range chosen {
		heldExperts += float64(n) * float64(wb.expertHeld[l])
	}
	rep.WeightBytesPerDecodeToken = float64(wb.stored)/float64(opt.Batch) + rep.ExpertBytesPerToken
	rep.HeldBytesPerDecodeToken = float64(wb.held)/float64(opt.Batch) + heldExperts/steps/float64(opt.Batch)
	rep.DecodeBytesPerS = rep.WeightBytesPerDecodeToken * rep.DecodeTokensPerS
	rep.RSS, rep.RSSAnon, rep.RSSFile, rep.PeakRSS = ReadRSS()
	rep.FileHuge = readFilePmdMapped()
	return nil
}

func argmaxRows(rows [][]float32) []int64 {
	out := make([]int64, len(rows))
	for b, l := range rows {
		bi := 0
		for i, v := range l {
			if v > l[bi] {
				bi = i
			}
		}
		out[b] = int64(bi)
	}
	return out
}

// weightBytes are the weight bytes of one decode step (all rows).
type weightBytes struct {
	stored, held int64 // every weight but the routed experts
	// per layer: bytes of one routed expert (w1, w2 and w3 together)
	expertStored, expertHeld map[int]int64
}

// rowGatherOps read only the rows of their first argument that their
// second argument names.
var rowGatherOps = map[string]bool{"embed": true, "engram_lookup": true, "token_map": true}

// decodeWeightBytes sums the weights the decode graph reads in one step:
// whole matrices, per-row tables only for the rows looked up, and routed
// experts per expert (the caller multiplies by the experts chosen).
func decodeWeightBytes(m *engine.Model, env ir.Bindings) weightBytes {
	wb := weightBytes{expertStored: map[int]int64{}, expertHeld: map[int]int64{}}
	uses := m.Module.Graph("decode").Uses()
	for _, n := range m.Module.Graph("decode").Weights() {
		stored, held, err := m.WeightBytes(n)
		if err != nil {
			continue
		}
		if e := n.Attrs.Int("experts", 0); e > 0 {
			l := int(n.Attrs.Int("layer", -1))
			wb.expertStored[l] += stored / e
			wb.expertHeld[l] += held / e
			continue
		}
		us := uses[n]
		perRow := len(us) > 0 && len(n.Type.Shape) > 0
		for _, u := range us {
			perRow = perRow && rowGatherOps[u.Op] && len(u.Args) > 1 && u.Args[0] == n
		}
		if !perRow {
			wb.stored += stored
			wb.held += held
			continue
		}
		rowsTotal := int64(max(n.Type.Shape[0].N, 1))
		var looked int64
		for _, u := range us {
			idx := int64(1)
			for _, v := range shapeOf(u.Args[1].Type, env) {
				idx *= v
			}
			looked += idx
		}
		looked = min(looked, rowsTotal)
		wb.stored += stored * looked / rowsTotal
		wb.held += held * looked / rowsTotal
	}
	return wb
}

// shapeOf evaluates a type's dimensions under env (an unknown one counts as M).
func shapeOf(t ir.Type, env ir.Bindings) []int64 {
	out := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		v, err := env.Dim(d)
		if err != nil || v < 0 {
			v = env.M
		}
		out[i] = v
	}
	return out
}

func prod(v []int64) float64 {
	p := 1.0
	for _, x := range v {
		p *= float64(x)
	}
	return p
}

// graphFLOPs counts 2·M·N·K over the matmul-like nodes of g for one call
// under env, and the part of it that multiplies weights.
func graphFLOPs(g *ir.Graph, env ir.Bindings) (total, weights float64) {
	for _, n := range g.Nodes {
		var f float64
		isWeight := true
		switch n.Op {
		case "matmul", "matmul_fp8", "matmul_fp4", "grouped_matmul":
			// x [..., K] · w[N, K]ᵀ (grouped: w [G·rank, dg], x [..., G·dg]).
			x, w := shapeOf(n.Args[0].Type, env), shapeOf(n.Args[1].Type, env)
			if len(x) == 0 || len(w) != 2 {
				continue
			}
			rows := prod(x) / float64(max(x[len(x)-1], 1))
			f = 2 * rows * float64(w[0]) * float64(w[1])
		case "expert_matmul":
			// idx [N, k], w [E, O, K]: the chosen experts only.
			w, idx := shapeOf(n.Args[1].Type, env), shapeOf(n.Args[2].Type, env)
			if len(w) != 3 {
				continue
			}
			f = 2 * prod(idx) * float64(w[1]) * float64(w[2])
		case "hc_mix":
			h, fn := shapeOf(n.Args[0].Type, env), shapeOf(n.Args[1].Type, env)
			if len(h) < 2 || len(fn) != 2 {
				continue
			}
			f = 2 * prod(h) * float64(fn[0])
		case "index_score":
			q, k := shapeOf(n.Args[0].Type, env), shapeOf(n.Args[1].Type, env)
			if len(k) != 3 {
				continue
			}
			f, isWeight = 2*prod(q)*float64(k[1]), false
		case "sparse_attn":
			q, idx := shapeOf(n.Args[0].Type, env), shapeOf(n.Args[3].Type, env)
			if len(idx) != 3 {
				continue
			}
			f, isWeight = 4*prod(q)*float64(idx[2]), false
		default:
			continue
		}
		total += f
		if isWeight {
			weights += f
		}
	}
	return total, weights
}

// Text renders a report for a terminal.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend %s (%s), %d threads, checkpoint %s\n", r.Backend, r.KernelISA, r.Threads, engine.FormatBytes(r.Checkpoint))
	if r.SyntheticBytes > 0 {
		fmt.Fprintf(&b, "synthetic weights: %s generated in %.1f s (%.2f GB/s); open with binding %.1f s\n",
			engine.FormatBytes(r.SyntheticBytes), r.SyntheticSeconds, float64(r.SyntheticBytes)/1e9/max(r.SyntheticSeconds, 1e-9), r.OpenSeconds)
	}
	figs := append([]PrefillFigure(nil), r.Prefill...)
	sort.SliceStable(figs, func(i, j int) bool { return figs[i].Tokens < figs[j].Tokens })
	for _, f := range figs {
		fmt.Fprintf(&b, "prefill %5d tokens × %d: %9.3f s  %9.1f tokens/s  %7.2f GFLOP/s (%.3g FLOP)", f.Tokens, f.Batch, f.Seconds, f.TokensPerS, f.GFLOPS, f.FLOPs)
		if f.KernelsPerToken > 0 {
			fmt.Fprintf(&b, "  %.3g kernels/token", f.KernelsPerToken)
		}
		if f.GEMMFraction > 0 {
			fmt.Fprintf(&b, "  = %.1f %% of the GEMM", 100*f.GEMMFraction)
		}
		b.WriteString("\n")
		writeOpTimes(&b, f.OpTimes, "prompt token")
	}
	if g := r.GEMM; g != nil {
		fmt.Fprintf(&b, "CPU GEMM kernel alone: %s, %d×%d×%d", g.Kernel, g.M, g.K, g.N)
		if g.Weight != "" && g.WeightN > 0 {
			fmt.Fprintf(&b, " (K of %s, N cut from %d)", g.Weight, g.WeightN)
		} else if g.Weight != "" {
			fmt.Fprintf(&b, " (K, N of %s)", g.Weight)
		}
		fmt.Fprintf(&b, ": %.2f GFLOP/s (best of %d calls, %.4f s)\n", g.GFLOPS, g.Calls, g.Seconds)
	}
	for _, f := range r.Long {
		chunk := "one call"
		if f.Chunk > 0 {
			chunk = fmt.Sprintf("chunks of %d", f.Chunk)
		}
		if f.FullRows {
			chunk += ", every row"
		}
		fmt.Fprintf(&b, "long context %6d tokens × %d (%s): prefill %9.2f s  %8.1f tokens/s; decode after it %.3f tokens/s; RSS %s before, peak %s (file %s), caches %s, arenas %s\n",
			f.Tokens, f.Batch, chunk, f.PrefillSeconds, f.PrefillTokensPerS, f.DecodeTokensPerS, engine.FormatBytes(f.BaseRSS), engine.FormatBytes(f.PeakRSS), engine.FormatBytes(f.RSSFile),
			engine.FormatBytes(f.CacheBytes), engine.FormatBytes(f.ArenaBytes))
		fmt.Fprintf(&b, "  digests: last logits %s, states %s, decode %s\n", f.LogitsDigest, f.StateDigest, f.DecodeDigest)
	}
	fmt.Fprintf(&b, "decode (after %d tokens, %d steps): %.3f tokens/s\n", r.DecodeContext, r.DecodeSteps, r.DecodeTokensPerS)
	fmt.Fprintf(&b, "weights per decoded token: %s as stored (%.2f experts, %s of them), %s as held\n",
		engine.FormatBytes(int64(r.WeightBytesPerDecodeToken)), r.ExpertsPerToken, engine.FormatBytes(int64(r.ExpertBytesPerToken)), engine.FormatBytes(int64(r.HeldBytesPerDecodeToken)))
	fmt.Fprintf(&b, "decode reads %.2f GB/s of weights", r.DecodeBytesPerS/1e9)
	if r.ProbeBytesPerS > 0 {
		fmt.Fprintf(&b, " = %.1f %% of this machine's bandwidth (probe %.2f GB/s over %s; floor %.2f tokens/s)",
			100*r.BandwidthFraction, r.ProbeBytesPerS/1e9, engine.FormatBytes(r.ProbeBytes), r.FloorTokensPerS)
	}
	b.WriteString("\n")
	if d := r.Device; d != nil {
		if d.ProbeGBs > 0 {
			fmt.Fprintf(&b, "device bandwidth probe %.1f GB/s over %s: decode at %.1f %% of it\n", d.ProbeGBs, engine.FormatBytes(d.ProbeBytes), 100*d.ProbeFraction)
		}
		if d.FloorGBs > 0 {
			fmt.Fprintf(&b, "weight-bandwidth floor at %.0f GB/s: %.2f tokens/s; decode at %.1f %% of it (%.2fx the floor's step time)\n",
				d.FloorGBs, d.FloorTokensPerS, 100*d.FloorFraction, 1/max(d.FloorFraction, 1e-300))
		}
		fmt.Fprintf(&b, "per decode step: %.1f kernels, %.1f launches, %.2f graph replays, %.2f graph captures\n",
			d.KernelsPerStep, d.LaunchesPerStep, d.GraphReplaysPerStep, d.GraphCapturesPerStep)
	}
	writeOpTimes(&b, r.DecodeOpTimes, "decoded token")
	if len(r.DecodeLayerTimes) > 0 {
		b.WriteString("  kernel time per decoded token by layer:\n")
		for _, l := range r.DecodeLayerTimes {
			name := fmt.Sprintf("layer %d", l.Layer)
			if l.Layer < 0 {
				name = "outside layers"
			}
			parts := "no compressor/indexer" // sliding-window or reuse
			if l.Layer < 0 {
				parts = "embedding, head"
			} else if len(l.Parts) > 0 {
				parts = strings.Join(l.Parts, "+")
			}
			fmt.Fprintf(&b, "    %-15s %-26s %9.4f ms %5.1f %% (%.0f kernels)\n", name, parts, l.MsPerToken, 100*l.Share, l.KernelsPerTok)
		}
	}
	fmt.Fprintf(&b, "resident memory after decode: %s (anonymous %s, mapped file %s of which %s in 2 MiB pages; peak %s)\n",
		engine.FormatBytes(r.RSS), engine.FormatBytes(r.RSSAnon), engine.FormatBytes(r.RSSFile), engine.FormatBytes(r.FileHuge), engine.FormatBytes(r.PeakRSS))
	if r.RSSFile > 64<<20 && r.FileHuge < r.RSSFile/2 {
		// the page cache holds the checkpoint in small folios (written, or
		// read through 4 KiB pages): decode pays a TLB miss every 4 KiB
		b.WriteString("note: most of the checkpoint is mapped with 4 KiB pages; dropping its page cache once (echo 1 > /proc/sys/vm/drop_caches) lets the next load map 2 MiB pages, which decode streams faster\n")
	}
	return b.String()
}

// writeOpTimes renders op times (nothing when there are none).
func writeOpTimes(b *strings.Builder, figs []OpTimeFigure, per string) {
	if len(figs) == 0 {
		return
	}
	fmt.Fprintf(b, "  kernel time per %s by op:\n", per)
	for _, t := range figs {
		fmt.Fprintf(b, "    %-20s %9.4f ms %5.1f %% (%.3g calls)\n", t.Op, t.MsPerToken, 100*t.Share, t.CallsPerToken)
	}
}

// longOptions is the session of a long-context row of S tokens: the
// prompt, a warm-up and the timed decode steps.
func longOptions(opt Options, S int) engine.Options {
	return engine.Options{Batch: opt.Batch, MaxLen: S + opt.DecodeWarmup + opt.DecodeSteps + 1, PrefillLen: S,
		PrefillChunk: opt.PrefillChunk, FullRows: opt.FullRows, MaxMemory: opt.MaxMemory}
}

// longRow prefills prompt p of S tokens (in chunks) and times the decode
// steps after it.
func longRow(m *engine.Model, opt Options, S int, p [][]int64) (LongFigure, error) {
	f := LongFigure{Tokens: S, Batch: opt.Batch, Chunk: longOptions(opt, S).ChunkSize(), FullRows: opt.FullRows, DecodeSteps: opt.DecodeSteps}
	resetPeakRSS()
	f.BaseRSS, _, _, _ = ReadRSS()
	s, err := m.NewSession(longOptions(opt, S))
	if err != nil {
		return f, err
	}
	defer s.Close()
	t0 := time.Now()
	lg, err := s.Prefill(p)
	if err != nil {
		return f, err
	}
	f.PrefillSeconds = time.Since(t0).Seconds()
	f.PrefillTokensPerS = float64(S*opt.Batch) / f.PrefillSeconds
	f.LogitsDigest, f.StateDigest = engine.FloatDigest(lg.Last()...), s.StateDigest()
	var decoded [][]float32
	next := argmaxRows(lg.Last())
	for range opt.DecodeWarmup {
		if lg, err = s.Decode(next); err != nil {
			return f, err
		}
		next = argmaxRows(lg.Last())
	}
	t1 := time.Now()
	for range opt.DecodeSteps {
		if lg, err = s.Decode(next); err != nil {
			return f, err
		}
		next = argmaxRows(lg.Last())
		decoded = append(decoded, lg.Last()...)
	}
	f.DecodeTokensPerS = float64(opt.DecodeSteps*opt.Batch) / time.Since(t1).Seconds()
	f.DecodeDigest = engine.FloatDigest(decoded...)
	f.CacheBytes, f.ArenaBytes = s.StateBytes(), s.ArenaBytes()
	_, _, f.RSSFile, f.PeakRSS = ReadRSS()
	return f, nil
}
