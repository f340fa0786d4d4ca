package engine

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
	"github.com/ds4go/ds4/passes"
)

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

func openTiny(t *testing.T) *Model { return openTinyPasses(t, "") }

// openTinyPasses opens the tiny checkpoint on the CPU backend, its module
// run through the named passes first unless passNames is "" (closed when
// the test ends).
func openTinyPasses(t *testing.T, passNames string) *Model {
	t.Helper()
	m := dstest.BuildTiny(t)
	if passNames != "" {
		if _, err := passes.Run(m, passes.ParseNames(passNames), passes.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	md, err := Open(m, dstest.TinyDir(), "cpu")
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
		real += st.Bytes()
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

func (p panicProgram) Launch(env *backends.Env) error {
	if p.err != nil {
		return p.err
	}
	panic("boom: a bug inside a backend")
}

// panicDevice is a host device whose programs are prog.
type panicDevice struct {
	*backends.HostDevice
	prog backends.Program
}

func (d panicDevice) Prepare(*backends.Segment) (backends.Program, error) { return d.prog, nil }

// A panic in a call, or one a backend recovered itself, comes back as an
// InternalError naming the call.
func TestInternalErrorNamesTheCall(t *testing.T) {
	md := openTiny(t)
	for _, prog := range []backends.Program{panicProgram{}, panicProgram{err: fmt.Errorf("%%12 (matmul): %w", &backends.KernelPanic{Node: "%12 (matmul)", Value: "boom"})}} {
		md2 := *md
		devs := map[string]backends.Device{}
		for name := range md.devs {
			devs[name] = panicDevice{&backends.HostDevice{}, prog}
		}
		r, err := backends.NewRunner(md.PrefillPlacement, devs)
		if err != nil {
			t.Fatal(err)
		}
		md2.prefill = r
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

// TestActivationEstimateBoundsArena: with the plan's buffer slots, the
// activation estimate is an upper bound of what the session's arenas hold
// after a prefill and decode steps up to the maximum length.
func TestActivationEstimateBoundsArena(t *testing.T) {
	md := openTinyPasses(t, "none")
	const prompt, maxLen = 12, 20
	opt := Options{Batch: 2, MaxLen: maxLen, PrefillLen: prompt, MaxMemory: -1}
	need := md.SessionMemory(opt)
	s, err := md.NewSession(opt)
	if err != nil {
		t.Fatal(err)
	}
	rows := [][]int64{make([]int64, prompt), make([]int64, prompt)}
	for i := range rows[0] {
		rows[0][i], rows[1][i] = int64(i+3), int64(2*i+5)
	}
	if _, err := s.Prefill(rows); err != nil {
		t.Fatal(err)
	}
	for s.Pos < maxLen {
		if _, err := s.Decode([]int64{7, 9}); err != nil {
			t.Fatal(err)
		}
	}
	got := s.ArenaBytes()
	t.Logf("arenas hold %d bytes, estimate %d", got, need.Activations)
	if got == 0 || got > need.Activations {
		t.Errorf("arenas hold %d bytes, estimate %d must bound them", got, need.Activations)
	}
}

// TestSessionMemoryChunked checks that prefilling in chunks bounds the
// activations by the chunk: a 4,096-token prompt in chunks of 256 needs
// less than an eighth of the one-call prefill's activations, and what its
// arenas hold after the chunked prefill stays within the estimate.
func TestSessionMemoryChunked(t *testing.T) {
	md := openTinyPasses(t, "default")
	one := md.SessionMemory(Options{Batch: 1, MaxLen: 4096, PrefillLen: 4096})
	opt := Options{Batch: 1, MaxLen: 4096, PrefillLen: 4096, PrefillChunk: 256}
	ch := md.SessionMemory(opt)
	if ch.Activations <= 0 || ch.Activations*8 > one.Activations || ch.Caches != one.Caches {
		t.Fatalf("activations: %d in chunks of 256, %d in one call (caches %d, %d): want under an eighth", ch.Activations, one.Activations, ch.Caches, one.Caches)
	}
	s := prefillChunked(t, md, opt, 7919)
	defer s.Close()
	if got := s.ArenaBytes(); got <= 0 || got > ch.Activations {
		t.Errorf("arenas hold %d bytes after the chunked prefill, the estimate is %d", got, ch.Activations)
	}
	t.Logf("activations: one call %s, chunks of 256 %s (arenas %s)", FormatBytes(one.Activations), FormatBytes(ch.Activations), FormatBytes(s.ArenaBytes()))
}

// TestChunkSlotsBySize: the chunk graph's slots, re-assigned by size for
// the host (packChunkSlots), pass the plan reader's proof and hold less at
// a long prompt's last chunk than the plan's first-free slots sized with
// every value, and the chunked prefill's arenas stay within the estimate.
func TestChunkSlotsBySize(t *testing.T) {
	md := openTinyPasses(t, "default")
	if err := ir.CheckBuffers(md.cg); err != nil {
		t.Fatal(err)
	}
	opt := Options{Batch: 1, MaxLen: 4096, PrefillLen: 4096, PrefillChunk: 256}
	cb := md.chunkBindings(opt)
	packed := activationBytes(md.cg, cb, hostSkip(cb))
	planned := activationBytes(md.Module.Graph("chunk"), cb, nil)
	t.Logf("chunk of 256 at 4,096 tokens: %s by size for the host, %s as planned", FormatBytes(packed), FormatBytes(planned))
	if packed <= 0 || packed*3 > planned*2 {
		t.Errorf("the chunk graph's slots by size hold %d bytes, the plan's %d: want under two thirds", packed, planned)
	}
	s := prefillChunked(t, md, opt, 104729)
	defer s.Close()
	if got, est := s.ArenaBytes(), md.SessionMemory(opt).Activations; got <= 0 || got > est {
		t.Errorf("arenas hold %d bytes after the chunked prefill, the estimate is %d", got, est)
	}
}

// Long prompts take smaller chunks so that a chunk's index scores (chunk ×
// prompt) stay bounded, never below 256 tokens or above what was asked.
func TestLongPromptChunk(t *testing.T) {
	for _, c := range []struct{ chunk, S, want int }{
		{2048, 4096, 2048}, {2048, 8192, 2048}, {2048, 8193, 1024}, {2048, 16384, 1024},
		{2048, 32768, 512}, {2048, 65536, 256}, {2048, 1 << 20, 256}, {300, 1 << 20, 300},
		{1000, 65536, 500}, {512, 65536, 256}, {256, 65536, 256},
	} {
		if got := longPromptChunk(c.chunk, c.S); got != c.want {
			t.Errorf("longPromptChunk(%d, %d) = %d, want %d", c.chunk, c.S, got, c.want)
		}
	}
}

// prefillChunked opens a session of opt and prefills 4,096 token ids
// (i·mul mod vocab) in it.
func prefillChunked(t *testing.T, md *Model, opt Options, mul int) *Session {
	t.Helper()
	s, err := md.NewSession(opt)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 4096)
	for i := range ids {
		ids[i] = int64(i*mul) % int64(md.Vocab)
	}
	if _, err := s.Prefill([][]int64{ids}); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}
