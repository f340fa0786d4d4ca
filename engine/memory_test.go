package engine

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

func TestEvalDim(t *testing.T) {
	env := dimEnv{B: 2, S: 5, M: 64, P: 7}
	for s, want := range map[string]int64{
		"B": 2, "S": 5, "M": 64, "P": 7, "M/2": 32, "B*S": 10, "(P+S)/2": 6, "(P+1)/2-P/2": 1,
		"min(S,128)": 5, "max(S,128)": 128, "min(4,(P+1)/2)+8": 12, "S+(P+S)/2": 11, "12": 12,
	} {
		got, ok := evalDim(s, env)
		if !ok || got != want {
			t.Errorf("evalDim(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "Q", "M/0", "min(S)", "(S", "S)", "B S"} {
		if v, ok := evalDim(s, env); ok && s != "B S" {
			t.Errorf("evalDim(%q) = %d, want failure", s, v)
		}
	}
	// Saturation instead of overflow.
	if v, _ := evalDim("M*M*M", dimEnv{M: math.MaxInt64 / 2}); v != math.MaxInt64 {
		t.Errorf("M*M*M = %d, want saturation", v)
	}
}

func TestParseFormatBytes(t *testing.T) {
	for s, want := range map[string]int64{"123": 123, "10K": 10240, "512M": 512 << 20, "2G": 2 << 30, "1GiB": 1 << 30, "3 MB": 3 << 20, "7B": 7} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x", "-1", "1.5G", "99999999999999T"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("ParseBytes(%q) accepted", s)
		}
	}
	if got := FormatBytes(1536 << 20); got != "1.5 GiB" {
		t.Errorf("FormatBytes = %q", got)
	}
}

func openTiny(t *testing.T) *Model {
	t.Helper()
	dir := filepath.Join("..", "testdata", "tiny")
	c, err := deepseekv4.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	md, err := Open(m, dir, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(md.Close)
	return md
}

func TestSessionMemory(t *testing.T) {
	md := openTiny(t)
	a := md.SessionMemory(Options{Batch: 1, MaxLen: 64, PrefillLen: 8})
	b := md.SessionMemory(Options{Batch: 2, MaxLen: 64, PrefillLen: 8})
	c := md.SessionMemory(Options{Batch: 1, MaxLen: 128, PrefillLen: 8})
	if a.Caches <= 0 || a.Ropes <= 0 || a.Activations <= 0 {
		t.Fatalf("need %+v has empty parts", a)
	}
	if b.Caches != 2*a.Caches || c.Caches <= a.Caches || b.Activations <= a.Activations {
		t.Errorf("need does not grow with B and M: %+v %+v %+v", a, b, c)
	}
	// The estimate covers what the session really allocates for its state.
	s, err := md.NewSession(Options{Batch: 2, MaxLen: 64, PrefillLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	var real int64
	for _, st := range s.state {
		real += int64(4*len(st.F32) + 8*len(st.I64))
	}
	if real != b.Caches {
		t.Errorf("caches: estimated %d bytes, allocated %d", b.Caches, real)
	}
	// Absurd lengths saturate instead of overflowing, and are refused.
	huge := md.SessionMemory(Options{Batch: math.MaxInt32, MaxLen: math.MaxInt64 / 4})
	if huge.Total() != math.MaxInt64 {
		t.Errorf("huge need = %d, want saturation", huge.Total())
	}
	_, err = md.NewSession(Options{Batch: 1, MaxLen: 64, MaxMemory: 1000})
	if err == nil || !strings.Contains(err.Error(), "more than the -max-memory limit of 1000 bytes") {
		t.Errorf("NewSession under a 1000-byte limit: %v", err)
	}
	if _, err := md.NewSession(Options{Batch: 1, MaxLen: 1 << 40}); err == nil || !strings.Contains(err.Error(), " needs ") {
		t.Errorf("NewSession of 2^40 tokens: %v", err)
	}
}

type panicProgram struct{ err error }

func (p panicProgram) Run(env *backends.Env) error {
	if p.err != nil {
		return p.err
	}
	panic("boom: a bug inside a backend")
}

// A panic in a call, or one a backend recovered itself, comes back as an
// InternalError naming the call.
func TestInternalErrorNamesTheCall(t *testing.T) {
	md := openTiny(t)
	for _, prog := range []backends.Program{panicProgram{}, panicProgram{err: errors.New("internal error in %12 (matmul): boom; please report it")}} {
		md2 := *md
		md2.prefill = prog
		s, err := md2.NewSession(Options{Batch: 1, MaxLen: 8})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Prefill([][]int64{{1, 2}})
		var ie *InternalError
		if !errors.As(err, &ie) || ie.Where != "the prefill call" {
			t.Errorf("Prefill error %v (%T), want an InternalError of the prefill call", err, err)
		}
	}
}

// A plan whose fp4 weight is not a matrix is refused, not a panic.
func TestOpenRefusesNonMatrixFP4(t *testing.T) {
	mk := func(name string) *ir.Graph {
		g := ir.NewGraph(name)
		w := g.Source("weight", ir.T(ir.FP4E2M1, 64), ir.Attrs{"name": "layers.0.ffn.experts.0.w1.weight", "format": "fp4"})
		g.SetOutput("logits", w)
		return g
	}
	m := &ir.Module{Graphs: []*ir.Graph{mk("prefill"), mk("decode")}}
	_, err := Open(m, filepath.Join("..", "testdata", "tiny"), "cpu")
	var ie *InternalError
	if err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "not a matrix") {
		t.Errorf("Open: %v", err)
	}
}
