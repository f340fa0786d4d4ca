package backendtest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
)

// Reference is the backend every other one is compared with.
const Reference = "cpu-ref"

// SeedEnv names the environment variable that fixes the seed (to repeat a
// failure); without it every run draws fresh inputs.
const SeedEnv = "DS4_BACKENDTEST_SEED"

// Run runs every case whose op the named backend claims in its
// Capabilities on that backend and on the reference, and compares the
// outputs (and the state after the call) with the case's tolerance. A case
// whose node the backend's capabilities refuse (a dtype, Accept) is
// skipped and reported: that node falls back. Run skips when the backend
// is not available here (no GPU), saying why.
func Run(t *testing.T, name string) {
	b, err := backends.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Available(); err != nil {
		t.Skipf("backend %s is not available here: %v", name, err)
	}
	caps := b.Capabilities()
	seed := Seed(t)
	var ran, fellBack, unclaimed []string
	start := time.Now()
	for _, c := range Cases() {
		if _, ok := caps.Ops[c.Op]; !ok {
			unclaimed = append(unclaimed, c.Name)
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			in := Build(t, c, seed)
			n := in.node(c.Op)
			if !caps.Supports(n) {
				fellBack = append(fellBack, c.Name)
				t.Skipf("falls back: %s refuses %%%d %s %s", name, n.ID, n.Op, n.Type)
			}
			repeat := fmt.Sprintf("(seed %d: %s=%d go test -run '%s')", seed, SeedEnv, seed, t.Name())
			out, err := Check(name, c, in)
			if err != nil {
				t.Fatalf("%v %s", err, repeat)
			}
			if out.Placed != name {
				fellBack = append(fellBack, c.Name)
				t.Skipf("falls back: the schedule placed %s on %s", c.Op, out.Placed)
			}
			for _, l := range out.Measured {
				t.Log(l)
			}
			for _, e := range out.Failed {
				t.Errorf("%v %s\n(tolerance: %s)", e, repeat, c.Tol.Why)
			}
			ran = append(ran, c.Name)
		})
	}
	t.Logf("backend %s: %d cases run, %d fall back (%s), %d not claimed (%s); %.1fs, seed %d",
		name, len(ran), len(fellBack), strings.Join(fellBack, " "), len(unclaimed), opsOf(unclaimed), time.Since(start).Seconds(), seed)
}

// opsOf lists the distinct ops of case names.
func opsOf(names []string) string {
	var ops []string
	for _, n := range names {
		op, _, _ := strings.Cut(n, "/")
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return strings.Join(ops, " ")
}

// Outcome is one case's comparison of a backend with the reference.
type Outcome struct {
	Placed   string   // the backend the case's op ran on (the comparison is made only when it is the one asked for)
	Measured []string // what each output and state measured, and the tolerance
	Failed   []error  // the outputs and states beyond the tolerance
}

// Check runs the instance on backend and, when the case's op was placed
// there, on the reference, and compares every output and every state after
// the call with the case's tolerance. An error is a failure to run.
func Check(backend string, c Case, in *Instance) (*Outcome, error) {
	got, err := Exec(backend, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", backend, err)
	}
	out := &Outcome{Placed: got.Placement.Backend[in.node(c.Op)]}
	if out.Placed != backend {
		return out, nil
	}
	want, err := execCalls(Reference, in, false) // the reference's arena use is checked by TestCasesOnReference
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Reference, err)
	}
	check := func(what string, g, w *backends.Tensor) {
		d, err := Compare(g, w, c.Tol)
		if err != nil {
			out.Failed = append(out.Failed, fmt.Errorf("%s: %w", what, err))
			return
		}
		out.Measured = append(out.Measured, fmt.Sprintf("%s: %v; tolerance %s", what, d, c.Tol))
	}
	for _, o := range in.Graph.Outputs {
		check("output "+o.Name, got.Outputs[o.Name], want.Outputs[o.Name])
	}
	for _, name := range slices.Sorted(maps.Keys(want.State)) {
		check("state "+name, got.State[name], want.State[name])
	}
	for _, name := range slices.Sorted(maps.Keys(want.Probes)) {
		check("probe "+name, got.Probes[name], want.Probes[name])
	}
	return out, nil
}

// Build makes the case's instance under the run's seed and assigns its
// buffer slots as the compiler does (passes.AssignBuffers), so that the
// values a case's graph keeps between its ops live in the arena. A
// builder's panic (a wrong graph: a bug of the case) fails the test.
func Build(t testing.TB, c Case, seed uint64) (in *Instance) {
	t.Helper()
	func() {
		defer func() {
			if e := recover(); e != nil {
				t.Fatalf("building case %s: %v", c.Name, e)
			}
		}()
		in = c.Build(CaseRand(seed, c.Name))
	}()
	if err := passes.AssignBuffers(in.Graph); err != nil {
		t.Fatalf("case %s: assigning buffers: %v", c.Name, err)
	}
	return in
}

// Seed is the run's seed: SeedEnv when set, else a fresh one; logged.
func Seed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (%s=%d repeats this run)", seed, SeedEnv, seed)
	return seed
}

// CaseRand is the generator of one case under the run's seed: each case
// draws the same inputs whatever else runs.
func CaseRand(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Result is what one call of an instance produced, in host memory.
type Result struct {
	Outputs   map[string]*backends.Tensor // by output name
	State     map[string]*backends.Tensor // every state after the call
	Probes    map[string]*backends.Tensor // with Instance.Trace: every probe's value
	Placement *backends.Placement
}

// Exec runs the instance on backend (its fallbacks taking what it does
// not claim) through the contract as the engine does: schedule, open the
// devices, make the arenas, prepare the segments, bind the weights, upload
// the state and inputs, launch, sync, download. It makes two calls on the
// same programs and arenas: the first with scrambled float inputs (so that
// a kernel that reads what an earlier call left in a buffer, or caches
// across calls, shows), the second with the instance's, whose outputs and
// state it returns. The instance is not modified.
func Exec(backend string, in *Instance) (*Result, error) { return execCalls(backend, in, true) }

// execCalls is Exec, with the first (scrambled) call only when warm.
func execCalls(backend string, in *Instance, warm bool) (res *Result, err error) {
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("panic: %v", e)
		}
	}()
	pl, err := backends.Schedule(in.Graph, backend)
	if err != nil {
		return nil, err
	}
	devs := map[string]backends.Device{}
	defer func() {
		for be, d := range devs {
			if cerr := d.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", be, cerr)
			}
		}
	}()
	arenas := map[string]backends.Arena{}
	defer func() { // before the devices close, as a session closes its arenas
		for be, a := range arenas {
			if cerr := a.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing the arena of %s: %w", be, cerr)
			}
		}
	}()
	sizes := backends.SlotSizes(in.Graph, in.Bindings(), nil)
	for _, n := range in.Graph.Nodes {
		be := pl.Backend[n]
		if devs[be] != nil {
			continue
		}
		b, err := backends.Get(be)
		if err != nil {
			return nil, err
		}
		if devs[be], err = b.Open(); err != nil {
			return nil, fmt.Errorf("opening %s: %w", be, err)
		}
		if arenas[be], err = devs[be].NewArena(sizes); err != nil {
			return nil, fmt.Errorf("%s: arena: %w", be, err)
		}
	}
	run, err := backends.NewRunner(pl, devs)
	if err != nil {
		return nil, err
	}
	bound := map[string]backends.Buffer{}
	calls := []map[string]*backends.Tensor{in.Inputs}
	if warm {
		calls = append([]map[string]*backends.Tensor{scrambled(in.Inputs)}, calls...)
	}
	for _, inputs := range calls {
		call, err := in.call(pl, devs, inputs, bound)
		if err != nil {
			return nil, err
		}
		call.Arenas = arenas
		probes := map[string]*backends.Tensor{}
		if in.Trace {
			call.Probe = in.probe(probes)
		}
		sent := map[string]*backends.Tensor{}
		for k, v := range call.Inputs {
			sent[k] = clone(v)
		}
		outs, err := run.Run(call)
		if err != nil {
			return nil, err
		}
		for k, v := range call.Inputs {
			if !sameTensor(v, sent[k]) {
				return nil, fmt.Errorf("input %s was modified by the call", k)
			}
		}
		if res, err = results(in, pl, devs, outs, call); err != nil {
			return nil, err
		}
		res.Probes = probes
	}
	return res, nil
}

// results downloads a call's outputs and state.
func results(in *Instance, pl *backends.Placement, devs map[string]backends.Device, outs map[string]backends.Buffer, call *backends.Call) (*Result, error) {
	var err error
	res := &Result{Outputs: map[string]*backends.Tensor{}, State: map[string]*backends.Tensor{}, Placement: pl}
	for _, o := range in.Graph.Outputs {
		if res.Outputs[o.Name], err = download(devs[pl.Backend[o.Node]], outs[o.Name]); err != nil {
			return nil, fmt.Errorf("output %s: %w", o.Name, err)
		}
	}
	for _, n := range in.Graph.Nodes {
		if n.Op == "state" {
			name := n.Attrs.Str("name", "")
			if res.State[name], err = download(devs[pl.Backend[n]], call.State[name]); err != nil {
				return nil, fmt.Errorf("state %s: %w", name, err)
			}
		}
	}
	return res, nil
}

// probe is the trace callback of a call: it reads every probe value back
// into seen and replaces forced ones by the instance's values.
func (in *Instance) probe(seen map[string]*backends.Tensor) func(backends.Device, string, bool, backends.Buffer) (backends.Buffer, error) {
	return func(d backends.Device, name string, force bool, v backends.Buffer) (backends.Buffer, error) {
		t, err := download(d, v)
		if err != nil {
			return nil, fmt.Errorf("probe %s: %w", name, err)
		}
		seen[name] = t
		if f, ok := in.Forced[name]; ok && force {
			return d.Upload(clone(f))
		}
		return v, nil
	}
}

// scrambled returns the inputs with every float value v replaced by
// -2v+0.5 (rounded to its dtype); integer inputs (ids, positions, masks)
// are kept, so that the call stays valid.
func scrambled(inputs map[string]*backends.Tensor) map[string]*backends.Tensor {
	out := map[string]*backends.Tensor{}
	for k, v := range inputs {
		c := clone(v)
		for i, x := range c.F32 {
			c.F32[i] = -2*x + 0.5
		}
		roundTo(c.DType, c.F32)
		out[k] = c
	}
	return out
}

// call makes one call of the instance on the placed devices: copies of
// inputs and of the instance's state (a call updates state in place),
// weights bound on first use (once per device, kept in bound across
// calls).
func (in *Instance) call(pl *backends.Placement, devs map[string]backends.Device, inputs map[string]*backends.Tensor, bound map[string]backends.Buffer) (*backends.Call, error) {
	c := &backends.Call{B: in.B, S: in.S, M: in.M, StartPos: in.P, Inputs: map[string]*backends.Tensor{}, State: map[string]backends.Buffer{}}
	for k, v := range inputs {
		c.Inputs[k] = clone(v)
	}
	if _, ok := c.Inputs["start_pos"]; !ok {
		c.Inputs["start_pos"] = scalar(int64(in.P))
	}
	for _, n := range in.Graph.Nodes {
		if n.Op != "state" {
			continue
		}
		name := n.Attrs.Str("name", "")
		buf, err := devs[pl.Backend[n]].Upload(clone(in.State[name]))
		if err != nil {
			return nil, fmt.Errorf("uploading state %s: %w", name, err)
		}
		c.State[name] = buf
	}
	c.Weight = func(be string, n *ir.Node) (backends.Buffer, error) {
		name := n.Attrs.Str("name", "")
		if b, ok := bound[be+"\x00"+name]; ok {
			return b, nil
		}
		w, ok := in.Weights[name]
		if !ok {
			return nil, fmt.Errorf("weight %q not in the case", name)
		}
		b, err := devs[be].BindWeight(w)
		if err != nil {
			return nil, fmt.Errorf("binding %s on %s: %w", name, be, err)
		}
		bound[be+"\x00"+name] = b
		return b, nil
	}
	c.Rope = func(be string, n *ir.Node) (backends.Buffer, error) {
		return devs[be].Upload(RopeTable(n.Attrs, in.M))
	}
	return c, nil
}

// RopeTable is the RoPE table [m, dim/2, 2] of a rope_table node's
// attributes, computed as the runtime computes it (precompute_freqs_cis).
func RopeTable(a ir.Attrs, m int) *backends.Tensor {
	tab := deepseekv4.FreqsCis(int(a.Int("dim", 0)), m, int(a.Int("original_seq_len", 0)),
		a.Float("base", 0), a.Float("factor", 1), a.Float("beta_fast", 32), a.Float("beta_slow", 1))
	return &backends.Tensor{DType: ir.F32, Shape: []int{m, tab.Pairs, 2}, F32: tab.CosSin}
}

// download reads a buffer back and puts float values in F32 (a host
// device may return a bf16 matrix as its stored bytes).
func download(d backends.Device, b backends.Buffer) (*backends.Tensor, error) {
	if b == nil {
		return nil, fmt.Errorf("no buffer")
	}
	t, err := d.Download(b)
	if err != nil {
		return nil, err
	}
	t = clone(t)
	if t.DType.IsFloat() && t.F32 == nil && t.Scale == nil && len(t.U8) == 2*t.NumElements() {
		t.F32 = make([]float32, t.NumElements())
		for k := range t.F32 {
			t.F32[k] = numfmt.BF16FromBits(binary.LittleEndian.Uint16(t.U8[2*k:]))
		}
		t.U8 = nil
	}
	return t, nil
}

func clone(t *backends.Tensor) *backends.Tensor {
	if t == nil {
		return nil
	}
	c := *t
	c.Shape = slices.Clone(t.Shape)
	c.F32, c.I64, c.I32, c.U8, c.Scale = slices.Clone(t.F32), slices.Clone(t.I64), slices.Clone(t.I32), slices.Clone(t.U8), slices.Clone(t.Scale)
	c.Parts = nil
	for _, p := range t.Parts {
		c.Parts = append(c.Parts, clone(p))
	}
	return &c
}

// sameTensor compares values bit for bit.
func sameTensor(a, b *backends.Tensor) bool {
	if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || len(a.F32) != len(b.F32) {
		return false
	}
	for k := range a.F32 {
		if math.Float32bits(a.F32[k]) != math.Float32bits(b.F32[k]) {
			return false
		}
	}
	return slices.Equal(a.I64, b.I64) && slices.Equal(a.I32, b.I32) && slices.Equal(a.U8, b.U8)
}
