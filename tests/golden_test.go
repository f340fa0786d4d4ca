package tests

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/fast"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/passes"
)

// This file checks block-local parity with the tiny golden run (the rules
// of the golden README / tracecmp, reimplemented here so that the tests need
// nothing outside the repository) and free-running sanity.

func goldenPath() string { return filepath.Join(tinyDir(), "golden.safetensors") }

// goldTensor is a numeric view of one safetensors tensor.
type goldTensor struct {
	dtype string
	shape []int
	f     []float64
}

func goldLoad(t testing.TB, path string) map[string]*goldTensor {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*goldTensor{}
	for _, n := range f.Names() {
		x, _ := f.Get(n)
		v := &goldTensor{dtype: x.DType, shape: append([]int(nil), x.Shape...)}
		switch x.DType {
		case "F32", "F64", "BF16", "F16":
			fs, err := x.Float32s()
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			v.f = make([]float64, len(fs))
			for i, e := range fs {
				v.f[i] = float64(e)
			}
		case "I64", "I32", "I16", "I8", "U8", "BOOL":
			is, err := x.Int64s()
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			v.f = make([]float64, len(is))
			for i, e := range is {
				v.f[i] = float64(e)
			}
		default:
			continue
		}
		out[n] = v
	}
	return out
}

func (x *goldTensor) lastDim() int {
	if len(x.shape) == 0 {
		return 1
	}
	return x.shape[len(x.shape)-1]
}

// Tensor classes (golden README, "How to compare").
var (
	selectionClasses = map[string]bool{"index_topk": true, "gate_indices": true, "candidates": true, "attn_idxs": true}
	denseClasses     = map[string]bool{"attn_in": true, "attn_out": true, "ffn_in": true, "moe_out": true, "engram_out": true, "stream_out": true}
	requiredClasses  = map[string]bool{"stream_out": true, "attn_out": true, "moe_out": true, "gate_indices": true, "index_topk": true, "engram_out": true}
	blockName        = regexp.MustCompile(`^(prefill|decode\d+)\.L(\d+)\.(\w+)$`)
)

// goldTol bounds one tensor: rel L2 over its compared rows and max abs.
type goldTol struct{ rel, abs float64 }

// goldTols are the bounds of one golden set: per class, and per tensor
// where one tensor is known to sit above its class (tensors overrides
// classes). Classes absent from classes are not compared.
type goldTols struct {
	classes map[string]goldTol
	tensors map[string]goldTol
}

func (g goldTols) of(name, cls string) goldTol {
	if t, ok := g.tensors[name]; ok {
		return t
	}
	return g.classes[cls]
}

// tinyTols are the tiny set's block-local bounds. Each is 2-4x the worst
// measured over the reference kernels, the portable and AVX2 levels and the
// plain and fused graphs (2-core AVX2 host, 2026-12; the three kernel sets
// agree to the digits below, so the AVX-512 level, which sums in yet another
// order and could not be measured here, is expected alike). "measured 0":
// bit-exact with every kernel set (forced inputs through ops whose result
// does not depend on the summation order, or rounded to bf16/fp8 after it),
// so required exact.
var tinyTols = goldTols{classes: map[string]goldTol{
	"attn_in":    {0, 0},         // measured 0
	"engram_out": {0, 0},         // measured 0
	"attn_out":   {4e-3, 0.02},   // measured 1.28e-3 / 5.9e-3
	"ffn_in":     {1.5e-3, 0.05}, // measured 4.7e-4 / 1.6e-2
	"moe_out":    {1e-2, 0.1},    // measured 3.8e-3 / 3.3e-2 (the README's limits)
	"stream_out": {4e-3, 0.1},    // measured 1.2e-3 / 4.7e-2
	// Sinkhorn mixes of the forced stream: f32 rounding only (measured
	// ≤ 2.9e-7 / 6.6e-7; README: ≤ 1e-5).
	"hc_attn_pre":  {1e-6, 2e-6},
	"hc_attn_post": {1e-6, 2e-6},
	"hc_attn_comb": {1e-6, 2e-6},
	// The FFN mixes are computed from the stream after this block's
	// attention, not from a forced one, so they carry its block-local noise
	// (≈1e-3) damped by the norm: the README's 1e-5 cannot hold. Measured
	// pre/pre_out 4.7e-5 / 2.7e-4, post 6.8e-5 / 7.3e-4, comb 1.26e-4 / 6.5e-4.
	"hc_ffn_pre":  {1.5e-4, 1e-3},
	"pre_out":     {1.5e-4, 1e-3},
	"hc_ffn_post": {2e-4, 2e-3},
	"hc_ffn_comb": {4e-4, 2e-3},
	// Logits of the forced final stream: f32 summation order only (measured
	// 9.5e-8 / 1.9e-6 with the reference kernels, 5.8e-8 / 9.5e-7 fast).
	"logits": {3e-7, 6e-6},
	"caches": {0, 0}, // measured 0: rounded to bf16/fp8 when stored
}}

type goldClassStat struct {
	n                  int
	worstRel, worstAbs float64
	worstAt            string
	over               []string
}

type goldReport struct {
	selRows, selEq int
	selDiff        []string // first differing selections
	classes        map[string]*goldClassStat
	missing        []string
}

// goldRowsEqual reports per row (last dim) whether both rows hold the same
// multiset of values; nil when the shapes differ.
func goldRowsEqual(a, b *goldTensor) []bool {
	w := a.lastDim()
	if b.lastDim() != w || len(a.f) != len(b.f) || w == 0 {
		return nil
	}
	eq := make([]bool, len(a.f)/w)
	x, y := make([]float64, w), make([]float64, w)
	for r := range eq {
		copy(x, a.f[r*w:(r+1)*w])
		copy(y, b.f[r*w:(r+1)*w])
		sort.Float64s(x)
		sort.Float64s(y)
		eq[r] = true
		for i := range x {
			if x[i] != y[i] {
				eq[r] = false
				break
			}
		}
	}
	return eq
}

// goldCompare applies the block-local acceptance rules to a trace with the
// bounds tols.
func goldCompare(golden, trace map[string]*goldTensor, tols goldTols) *goldReport {
	rep := &goldReport{classes: map[string]*goldClassStat{}}
	type key struct{ call, layer string }
	clean := map[key][]bool{}
	names := make([]string, 0, len(golden))
	for n := range golden {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := blockName.FindStringSubmatch(n)
		if m == nil || !selectionClasses[m[3]] {
			continue
		}
		tt, ok := trace[n]
		if !ok {
			if requiredClasses[m[3]] {
				rep.missing = append(rep.missing, n)
			}
			continue
		}
		eq := goldRowsEqual(golden[n], tt)
		if eq == nil {
			rep.missing = append(rep.missing, fmt.Sprintf("%s (shape %v vs %v)", n, golden[n].shape, tt.shape))
			continue
		}
		k := key{m[1], m[2]}
		if clean[k] == nil {
			clean[k] = make([]bool, len(eq))
			for i := range clean[k] {
				clean[k][i] = true
			}
		}
		tokens := len(clean[k])
		for i, e := range eq {
			rep.selRows++
			if e {
				rep.selEq++
				continue
			}
			if len(rep.selDiff) < 5 {
				rep.selDiff = append(rep.selDiff, fmt.Sprintf("%s row %d", n, i))
			}
			switch {
			case len(eq) == tokens:
				clean[k][i] = false
			case tokens > 0 && len(eq)%tokens == 0:
				clean[k][i%tokens] = false
			}
		}
	}
	for _, n := range names {
		var cls, call, layer string
		if m := blockName.FindStringSubmatch(n); m != nil {
			call, layer, cls = m[1], m[2], m[3]
		} else if strings.HasPrefix(n, "full.") {
			continue // free-running one-call prefill: not teacher-forced
		} else if strings.HasSuffix(n, ".logits") || strings.HasSuffix(n, ".logits_full") {
			cls = "logits"
		} else if strings.HasPrefix(n, "after_") {
			cls = "caches"
		} else {
			continue
		}
		if _, ok := tols.classes[cls]; !ok {
			continue
		}
		a := golden[n]
		tt, ok := trace[n]
		if !ok {
			if requiredClasses[cls] || cls == "logits" {
				rep.missing = append(rep.missing, n)
			}
			continue
		}
		if len(a.f) != len(tt.f) {
			rep.missing = append(rep.missing, fmt.Sprintf("%s (shape %v vs %v)", n, a.shape, tt.shape))
			continue
		}
		var mask []bool
		if denseClasses[cls] {
			mask = clean[key{call, layer}]
		}
		w := a.lastDim()
		rows := len(a.f) / w
		var num, den, mx float64
		for r := 0; r < rows; r++ {
			if len(mask) > 0 {
				tok := r
				if rows != len(mask) && rows%len(mask) == 0 {
					tok = r / (rows / len(mask))
				} else if rows != len(mask) {
					tok = -1
				}
				if tok >= 0 && tok < len(mask) && !mask[tok] {
					continue
				}
			}
			for i := r * w; i < (r+1)*w; i++ {
				d := tt.f[i] - a.f[i]
				num += d * d
				den += a.f[i] * a.f[i]
				if math.Abs(d) > mx || math.IsNaN(d) {
					mx = math.Abs(d)
				}
			}
		}
		rel := 0.0
		switch {
		case math.IsNaN(num):
			rel = math.NaN()
		case den > 0:
			rel = math.Sqrt(num / den)
		case num > 0:
			rel = math.Inf(1)
		}
		cs := rep.classes[cls]
		if cs == nil {
			cs = &goldClassStat{}
			rep.classes[cls] = cs
		}
		cs.n++
		if rel > cs.worstRel || math.IsNaN(rel) {
			cs.worstRel, cs.worstAt = rel, n
		}
		if mx > cs.worstAbs || math.IsNaN(mx) {
			cs.worstAbs = mx
		}
		if lim := tols.of(n, cls); !(rel <= lim.rel) || !(mx <= lim.abs) {
			cs.over = append(cs.over, fmt.Sprintf("%s rel %.2e abs %.2e", n, rel, mx))
		}
	}
	return rep
}

var (
	goldenOnce  sync.Once
	goldenT     map[string]*goldTensor
	teacherOnce sync.Once
	teacherT    map[string]*goldTensor
)

func golden(t *testing.T) map[string]*goldTensor {
	t.Helper()
	goldenOnce.Do(func() { goldenT = goldLoad(t, goldenPath()) })
	return goldenT
}

// teacherTrace is the block-local run of the golden (teacherRun), once.
func teacherTrace(t *testing.T) map[string]*goldTensor {
	t.Helper()
	teacherOnce.Do(func() {
		teacherT = goldLoad(t, teacherRun(t, "cpu", buildTiny(t), tinyDir(), goldenPath()))
	})
	if teacherT == nil {
		t.Fatal("teacher-forced run failed earlier")
	}
	return teacherT
}

// goldKernels is one way the CPU computes: the reference kernels (backend
// cpu-ref) or the fast kernels (backend cpu) at one level.
type goldKernels struct {
	name  string
	fast  bool
	level fast.Level
}

// backend is the registered backend of the kernel set.
func (k goldKernels) backend() string {
	if k.fast {
		return "cpu"
	}
	return "cpu-ref"
}

// goldKernelSets are the reference kernels and every level of the fast ones.
var goldKernelSets = []goldKernels{
	{name: "reference"},
	{name: "portable", fast: true, level: fast.Portable},
	{name: "avx2", fast: true, level: fast.AVX2},
	{name: "avx512", fast: true, level: fast.AVX512},
}

// goldWithKernels runs fn as subtest k.name with the kernel set's backend
// (and, for the fast kernels, its SIMD level selected), and skips, naming
// the missing CPU feature, a level this CPU lacks.
func goldWithKernels(t *testing.T, k goldKernels, fn func(t *testing.T, backend string)) {
	t.Run(k.name, func(t *testing.T) {
		if k.fast {
			if why := fast.Unsupported(k.level); why != "" {
				t.Skipf("kernel level %v not run: %s", k.level, why)
			}
			defer fast.SetLevel(fast.SetLevel(k.level))
		}
		fn(t, k.backend())
	})
}

// goldAssert checks a report: nothing missing, at most maxSelDiff selection
// rows differing, every compared tensor within its bound.
func goldAssert(t *testing.T, rep *goldReport, tols goldTols, maxSelDiff int) {
	t.Helper()
	if len(rep.missing) > 0 {
		t.Errorf("%d golden tensors missing or mis-shaped in the trace, e.g. %v", len(rep.missing), rep.missing[:min(5, len(rep.missing))])
	}
	t.Logf("selections: %d/%d rows identical; first differences %v", rep.selEq, rep.selRows, rep.selDiff)
	if rep.selRows == 0 || rep.selRows-rep.selEq > maxSelDiff {
		t.Errorf("selections: %d of %d rows differ, want at most %d (first: %v)", rep.selRows-rep.selEq, rep.selRows, maxSelDiff, rep.selDiff)
	}
	cls := make([]string, 0, len(tols.classes))
	for c := range tols.classes {
		cls = append(cls, c)
	}
	sort.Strings(cls)
	for _, c := range cls {
		cs := rep.classes[c]
		if cs == nil || cs.n == 0 {
			t.Errorf("no %s tensors compared", c)
			continue
		}
		lim := tols.classes[c]
		t.Logf("%-13s %4d tensors  worst rel %.2e (%s)  worst abs %.2e  (bounds rel %.1e, abs %.1e)", c, cs.n, cs.worstRel, cs.worstAt, cs.worstAbs, lim.rel, lim.abs)
		for i, o := range cs.over {
			if i == 8 {
				t.Errorf("... %d more", len(cs.over)-8)
				break
			}
			t.Errorf("over its bound: %s", o)
		}
	}
}

// TestGoldenBlockLocalParity runs the tiny golden teacher-forced with the
// reference kernels and at every kernel level this CPU has, and checks the
// trace against the golden (the seed has no top-k tie: every selection row
// must be identical).
func TestGoldenBlockLocalParity(t *testing.T) {
	g := golden(t)
	for _, k := range goldKernelSets {
		goldWithKernels(t, k, func(t *testing.T, backend string) {
			tr := goldLoad(t, teacherRun(t, backend, buildTiny(t), tinyDir(), goldenPath()))
			goldAssert(t, goldCompare(g, tr, tinyTols), tinyTols, 0)
		})
	}
}

// TestGoldenTeacherGreedyIDs: the cliArgmax of the teacher-forced logits is the
// golden's greedy ids (column 0 from the prefill, i+1 from decode step i).
func TestGoldenTeacherGreedyIDs(t *testing.T) {
	g := golden(t)
	tr := teacherTrace(t)
	gen := g["inputs.generated_ids"]
	B, N := gen.shape[0], gen.shape[1]
	V := g["prefill.logits_last"].shape[1]
	minGap := math.Inf(1)
	for j := 0; j < N; j++ {
		name := "prefill.logits_last"
		if j > 0 {
			name = fmt.Sprintf("decode%02d.logits", j-1)
		}
		lg, ok := tr[name]
		if !ok {
			t.Fatalf("trace has no %s", name)
		}
		for b := 0; b < B; b++ {
			row := lg.f[b*V : (b+1)*V]
			am, gap := goldArgmaxGap(row)
			minGap = math.Min(minGap, gap)
			if want := int(gen.f[b*N+j]); am != want {
				t.Errorf("%s row %d: cliArgmax %d, golden generated %d", name, b, am, want)
			}
		}
	}
	t.Logf("teacher-forced greedy ids match inputs.generated_ids (%d×%d); smallest top-1 gap %.3g", B, N, minGap)
}

func goldArgmaxGap(v []float64) (int, float64) {
	bi := 0
	for i, x := range v {
		if x > v[bi] {
			bi = i
		}
	}
	second := math.Inf(-1)
	for i, x := range v {
		if i != bi && x > second {
			second = x
		}
	}
	return bi, v[bi] - second
}

// TestGoldenExecTraceParity runs the teacher-forced golden through the
// commands (compile -model with its default passes, exec -trace-in
// -trace-out), applies the block-local rules to that trace, and requires it
// bit-identical to the same run in process on the same optimised module:
// exec only reads the plan and runs it. (Against the unoptimised module 828
// of 1,839 tensors differ, by ≤ 5.4e-4: the fused Sinkhorn and SwiGLU;
// TestPassesEquivalence bounds that.)
func TestGoldenExecTraceParity(t *testing.T) {
	plan := tinyPlan(t)
	out := filepath.Join(t.TempDir(), "trace.safetensors")
	r := runBin(t, "exec", "-plan", plan, "-trace-in", goldenPath(), "-trace-out", out)
	if r.code != 0 {
		t.Fatalf("exec -trace-in: status %d: %s", r.code, r.stderr)
	}
	t.Logf("exec -trace-in -trace-out: %v wall", r.dur)
	ex := goldLoad(t, out)
	g := golden(t)
	goldAssert(t, goldCompare(g, ex, tinyTols), tinyTols, 0)

	m := buildTiny(t)
	if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	tr := goldLoad(t, teacherRun(t, "cpu", m, tinyDir(), goldenPath()))
	differ := 0
	for name, a := range tr {
		b, ok := ex[name]
		switch {
		case !ok:
			t.Errorf("exec trace lacks %s", name)
		case fmt.Sprint(a.shape) != fmt.Sprint(b.shape):
			t.Errorf("%s: shape %v (in process) vs %v (exec)", name, a.shape, b.shape)
		case !slices.Equal(a.f, b.f):
			if differ++; differ <= 5 {
				rel, mx := goldRelL2(b.f, a.f)
				t.Errorf("%s: exec differs from the in-process run of the same module: rel %.2e, abs %.2e", name, rel, mx)
			}
		}
	}
	for name := range ex {
		if tr[name] == nil && name != "inputs.input_ids" && name != "inputs.generated_ids" {
			t.Errorf("exec trace has %s, the in-process run has not", name)
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d tensors differ between exec and the in-process run", differ, len(tr))
	}
	got, want := ex["inputs.generated_ids"], g["inputs.generated_ids"]
	if got == nil || !slices.Equal(got.f, want.f) {
		t.Errorf("exec greedy ids %v, golden %v", got, want.f)
	}
	in := ex["inputs.input_ids"]
	if in == nil || !slices.Equal(in.f, g["inputs.input_ids"].f) {
		t.Errorf("exec trace inputs.input_ids differ from the golden prompt")
	}
}

// goldFreeRun is a plain run (no teacher forcing) of the golden prompt and its
// decode tokens, plus a fresh one-call prefill of full_input_ids.
type goldFreeRun struct {
	trace   map[string]*goldTensor
	decode  [][]float32 // per decode step: [B*V]
	full    []float32   // [B, S+N, V]
	B, S, V int
}

func goldRunFree(t *testing.T) *goldFreeRun {
	t.Helper()
	return goldRunFreeKernels(t, true)
}

// goldRunFreeKernels is goldRunFree with the CPU backend's fast kernels on
// or off (off: the reference kernels, backend cpu-ref).
func goldRunFreeKernels(t *testing.T, fast bool) *goldFreeRun {
	t.Helper()
	backend := "cpu-ref"
	if fast {
		backend = "cpu"
	}
	gf, err := safetensors.Open(goldenPath())
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	prompt := ids2(t, gf, "inputs.input_ids")
	dec := ids2(t, gf, "inputs.decode_input_ids")
	fullIDs := ids2(t, gf, "inputs.full_input_ids")
	model, err := engine.Open(buildTiny(t), tinyDir(), backend)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	s, err := model.NewSession(engine.Options{Batch: len(prompt), MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	s.Tracer = engine.NewTracer(true, nil) // record only
	fr := &goldFreeRun{B: len(prompt), S: len(prompt[0])}
	lg, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	fr.V = lg.V
	for i := range dec[0] {
		col := make([]int64, len(dec))
		for b := range dec {
			col[b] = dec[b][i]
		}
		lg, err := s.Decode(col)
		if err != nil {
			t.Fatal(err)
		}
		fr.decode = append(fr.decode, append([]float32(nil), lg.Data...))
	}
	out := filepath.Join(t.TempDir(), "free.safetensors")
	if err := s.Tracer.Write(out); err != nil {
		t.Fatal(err)
	}
	fr.trace = goldLoad(t, out)

	s2, err := model.NewSession(engine.Options{Batch: len(fullIDs), MaxLen: 64, FullLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	lf, err := s2.Prefill(fullIDs)
	if err != nil {
		t.Fatal(err)
	}
	fr.full = lf.Data
	return fr
}

func goldStats(v []float64) (mean, std float64, finite bool) {
	finite = true
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			finite = false
		}
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v))), finite
}

func goldRelL2(a, b []float64) (rel, mx float64) {
	var num, den float64
	for i := range a {
		d := a[i] - b[i]
		num += d * d
		den += b[i] * b[i]
		mx = math.Max(mx, math.Abs(d))
	}
	if den == 0 {
		return math.Sqrt(num), mx
	}
	return math.Sqrt(num / den), mx
}

func goldF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestGoldenFreeRunningSanity checks a plain run (no teacher forcing) of
// the golden prompt and decode tokens. The reference is chaotic
// free-running (README), so beyond layer 0 only sanity holds: finite
// logits of the golden's spread, loosely close to the golden, mostly the
// same greedy ids.
func TestGoldenFreeRunningSanity(t *testing.T) {
	g := golden(t)
	fr := goldRunFree(t)

	t.Run("finite-and-std", func(t *testing.T) {
		// Measured: std within 0.2% of the golden's (3.01) for the prefill,
		// the decode steps and the one-call prefill; bound 5%.
		var all []float64
		for _, d := range fr.decode {
			all = append(all, goldF64(d)...)
		}
		_, gsd, _ := goldStats(g["prefill.logits_full"].f)
		_, gfsd, _ := goldStats(g["full.logits_full"].f)
		for _, c := range []struct {
			name string
			v    []float64
			want float64
		}{
			{"prefill.logits_full", fr.trace["prefill.logits_full"].f, gsd},
			{"decode logits", all, gfsd},
			{"one-call prefill logits", goldF64(fr.full), gfsd},
		} {
			_, sd, fin := goldStats(c.v)
			t.Logf("%s: std %.4f (golden %.4f)", c.name, sd, c.want)
			if !fin {
				t.Errorf("%s has non-finite values", c.name)
			}
			if math.Abs(sd/c.want-1) > 0.05 {
				t.Errorf("%s: std %.4f not within 5%% of the golden's %.4f", c.name, sd, c.want)
			}
		}
	})

	t.Run("layer0", func(t *testing.T) {
		// Layer 0 sees identical inputs free-running, so it meets the
		// block-local bounds.
		for _, cls := range []string{"attn_in", "attn_out", "ffn_in", "moe_out", "stream_out", "hc_attn_comb", "hc_ffn_pre"} {
			lim := tinyTols.classes[cls]
			for _, call := range []string{"prefill", "decode00", "decode11"} {
				name := call + ".L0." + cls
				a, b := fr.trace[name], g[name]
				if a == nil || b == nil || len(a.f) != len(b.f) {
					t.Errorf("%s: missing or mis-shaped", name)
					continue
				}
				rel, mx := goldRelL2(a.f, b.f)
				if !(rel <= lim.rel) || !(mx <= lim.abs) {
					t.Errorf("%s: rel %.2e abs %.2e, bounds %.1e / %.1e", name, rel, mx, lim.rel, lim.abs)
				}
			}
		}
	})

	t.Run("free-vs-golden", func(t *testing.T) {
		// Two correct runs differ free-running by 0.09 (prefill) to 0.29
		// (decode) in logits (README, torch CPU vs H200). Measured here
		// (portable, AVX2): prefill 0.048-0.139, one-call prefill
		// 0.069-0.146, worst decode step 0.27-0.38; greedy ids of the decode
		// steps equal to the golden's argmax 19-20 of 24. Bounds: 2x the
		// worst; at least 16 of 24 ids (unrelated logits give rel ≈ 1.4 and
		// almost no equal ids).
		rel, mx := goldRelL2(fr.trace["prefill.logits_full"].f, g["prefill.logits_full"].f)
		t.Logf("free-running prefill logits vs golden: rel %.2e abs %.2e", rel, mx)
		if !(rel <= 0.3) {
			t.Errorf("free-running prefill logits: rel %.2e from the golden, want ≤ 0.3", rel)
		}
		rel, mx = goldRelL2(goldF64(fr.full), g["full.logits_full"].f)
		t.Logf("one-call prefill of full_input_ids vs golden full.logits_full: rel %.2e abs %.2e", rel, mx)
		if !(rel <= 0.3) {
			t.Errorf("one-call prefill logits: rel %.2e from the golden, want ≤ 0.3", rel)
		}
		worst, same, n := 0.0, 0, 0
		for i := range fr.decode {
			want := g[fmt.Sprintf("decode%02d.logits", i)].f
			got := goldF64(fr.decode[i])
			r, _ := goldRelL2(got, want)
			worst = math.Max(worst, r)
			for b := 0; b < fr.B; b++ {
				a1, _ := goldArgmaxGap(got[b*fr.V : (b+1)*fr.V])
				a2, _ := goldArgmaxGap(want[b*fr.V : (b+1)*fr.V])
				if n++; a1 == a2 {
					same++
				}
			}
		}
		t.Logf("free-running decode logits vs golden: worst step rel %.2e; greedy ids equal %d/%d", worst, same, n)
		if !(worst <= 0.75) {
			t.Errorf("free-running decode logits: worst step rel %.2e from the golden, want ≤ 0.75", worst)
		}
		if same < 16 {
			t.Errorf("free-running decode: %d of %d greedy ids equal the golden's, want ≥ 16", same, n)
		}
	})

	t.Run("decode-vs-one-call-prefill", func(t *testing.T) {
		// With the reference kernels the executor is prefill/decode
		// consistent exactly: decode step i (position S+i, fed the golden
		// tokens, no teacher forcing) equals the one-call prefill of
		// prompt+fed tokens at that position (measured 0).
		ref := goldDecodeVsPrefill(t, "reference kernels", goldRunFreeKernels(t, false))
		if ref.worst != 0 || ref.argEq != ref.n {
			t.Errorf("reference kernels: decode vs one-call prefill worst rel %.2e, argmax equal %d/%d; want 0 and all", ref.worst, ref.argEq, ref.n)
		}
	})
	// The fast kernels: TestGoldenDecodeVsOneCallBlockLocal (free-running,
	// a near tie flips a top-k or a route in some row after a few steps and
	// the row is then as loosely related as two free runs).
}

type goldConsistency struct {
	worst    float64
	argEq, n int
}

// goldDecodeVsPrefill compares the decode logits of a free run with its
// one-call prefill at the same positions, and checks that the prompt
// positions of the one-call prefill equal the prompt prefill.
func goldDecodeVsPrefill(t *testing.T, what string, fr *goldFreeRun) goldConsistency {
	t.Helper()
	B, S, V := fr.B, fr.S, fr.V
	// Decode step i (position S+i, fed golden tokens, no teacher forcing)
	// against the one-call prefill of prompt+fed tokens at that position.
	N1 := S + len(fr.decode)
	worst, worstAbs := 0.0, 0.0
	worstAt, argEq := 0, 0
	var rels []float64
	for i, d := range fr.decode {
		for b := 0; b < B; b++ {
			full := fr.full[(b*N1+S+i)*V : (b*N1+S+i+1)*V]
			dec := d[b*V : (b+1)*V]
			r, mx := goldRelL2(goldF64(dec), goldF64(full))
			rels = append(rels, r)
			if r > worst {
				worst, worstAt = r, i
			}
			worstAbs = math.Max(worstAbs, mx)
			a1, _ := goldArgmaxGap(goldF64(dec))
			a2, _ := goldArgmaxGap(goldF64(full))
			if a1 == a2 {
				argEq++
			}
		}
	}
	sort.Float64s(rels)
	// The prompt part of the one-call prefill against our own prefill.
	pr := fr.trace["prefill.logits_full"].f
	var pa, pb []float64
	for b := 0; b < B; b++ {
		pa = append(pa, pr[b*S*V:(b+1)*S*V]...)
		pb = append(pb, goldF64(fr.full[b*N1*V:(b*N1+S)*V])...)
	}
	prel, pabs := goldRelL2(pa, pb)
	t.Logf("%s: prompt positions: one-call prefill vs prefill: rel %.2e abs %.2e", what, prel, pabs)
	t.Logf("%s: decode vs one-call prefill: median rel %.2e, worst rel %.2e (step %d), worst abs %.2e, argmax equal %d/%d", what,
		rels[len(rels)/2], worst, worstAt, worstAbs, argEq, len(rels))
	// Causality: the first S positions of the one-call prefill see the
	// same tokens as the prompt prefill.
	// Measured 0 with every kernel set: the same rows, the same GEMM shape.
	if prel != 0 {
		t.Errorf("prompt positions of the one-call prefill differ from the prefill: rel %.2e", prel)
	}
	return goldConsistency{worst: worst, argEq: argEq, n: len(rels)}
}
