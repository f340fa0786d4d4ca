package engine

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// Model is a compiled module bound to a checkpoint and a backend.
type Model struct {
	Module  *ir.Module
	prefill backends.OldProgram
	decode  backends.OldProgram
	// Placement of the decode graph's ops on backends (what fell back to the CPU).
	Placement *backends.OldPlacement
	pg, dg    *ir.Graph
	w         *binder
	Vocab     int
}

// Open binds the module's graphs to the checkpoint in dir and prepares them
// on the named backend. Every weight is bound and checked up front, so a
// broken checkpoint is reported before anything runs.
func Open(m *ir.Module, dir, backend string) (md *Model, err error) {
	var binding *ir.Node
	defer func() {
		if r := recover(); r != nil {
			where := "opening the model"
			if binding != nil {
				where = fmt.Sprintf("binding weight %q (%%%d)", binding.Attrs.Str("name", ""), binding.ID)
			}
			if md != nil {
				md.w.close()
			}
			md, err = nil, &InternalError{Where: where, Err: fmt.Errorf("%v", r)}
		}
	}()
	be, err := backends.GetOld(backend)
	if err != nil {
		return nil, err
	}
	pg, dg := m.Graph("prefill"), m.Graph("decode")
	if pg == nil || dg == nil {
		return nil, fmt.Errorf("plan has no prefill/decode graphs")
	}
	w, err := openCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	w.stored16 = backend == "cpu"
	md = &Model{Module: m, pg: pg, dg: dg, w: w}
	prog := newLoadProgress(w, pg, dg) // stderr progress (engine/progress.go)
	defer prog.done()
	for _, g := range []*ir.Graph{pg, dg} {
		for _, n := range g.Nodes {
			if n.Op != "weight" {
				continue
			}
			binding = n
			t, err := w.weight(n)
			if err != nil {
				w.close()
				return nil, err
			}
			prog.bound(n)
			if n.Attrs.Str("name", "") == "embed.weight" {
				md.Vocab = t.Shape[0]
			}
		}
	}
	var fallback backends.OldBackend
	if backend != "cpu" {
		if fallback, err = backends.GetOld("cpu"); err != nil {
			w.close()
			return nil, err
		}
	}
	if md.prefill, _, err = backends.ScheduleOld(pg, be, fallback); err == nil {
		md.decode, md.Placement, err = backends.ScheduleOld(dg, be, fallback)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return md, nil
}

// Close releases the mapped checkpoint.
func (m *Model) Close() { m.w.close() }

// InternalError is a bug of the engine or a backend (a recovered panic),
// not bad input; Where names the weight, call or op.
type InternalError struct {
	Where string
	Err   error
}

func (e *InternalError) Error() string { return fmt.Sprintf("%s: %v", e.Where, e.Err) }

func (e *InternalError) Unwrap() error { return e.Err }

// Options size a session.
type Options struct {
	Batch  int
	MaxLen int // maximum total length (prompt + generated); sizes the caches
	// PrefillLen is the prompt length, for the memory estimate (0: MaxLen).
	PrefillLen int
	// MaxMemory caps the bytes the session may need (engine/memory.go):
	// 0 = MemAvailable of /proc/meminfo, < 0 = no check.
	MaxMemory int64
}

// Session is one batch of sequences and their caches.
type Session struct {
	m      *Model
	opt    Options
	state  map[string]*backends.Tensor
	ropes  map[string]*backends.Tensor
	Pos    int // tokens processed so far
	Calls  int // decode calls so far
	Tracer *Tracer
	arenas map[backends.OldProgram]*backends.HostArena
	ratios map[string]int // compression ratio of each cache, from its M/r rows

	// OpTimes, when not nil, accumulates each op's kernel wall time.
	OpTimes map[string]*backends.OpTime

	// observe, when set (and Tracer is nil), sees every probe (engine/bench.go).
	observe func(name string, force bool, t *backends.Tensor) (*backends.Tensor, error)
}

// NewSession allocates the caches for a batch and a maximum length.
func (m *Model) NewSession(opt Options) (*Session, error) {
	if opt.Batch <= 0 || opt.MaxLen <= 0 {
		return nil, fmt.Errorf("batch %d and maximum length %d must be positive", opt.Batch, opt.MaxLen)
	}
	if err := m.checkMemory(opt); err != nil {
		return nil, err
	}
	s := &Session{m: m, opt: opt, state: map[string]*backends.Tensor{}, ropes: map[string]*backends.Tensor{}, ratios: map[string]int{}}
	for _, n := range m.pg.Nodes {
		if n.Op != "state" {
			continue
		}
		shape, err := stateShape(n.Type.Shape, opt)
		if err != nil {
			return nil, fmt.Errorf("state %s: %v", n.Attrs.Str("name", ""), err)
		}
		t := &backends.Tensor{DType: n.Type.DType, Shape: shape}
		size := t.NumElements()
		if n.Type.DType == ir.I64 {
			t.I64 = make([]int64, size)
		} else {
			t.F32 = make([]float32, size)
		}
		if n.Attrs.Str("kind", "") == "compressor_score" {
			for i := range t.F32 {
				t.F32[i] = float32(math.Inf(-1))
			}
		}
		s.state[n.Attrs.Str("name", "")] = t
		if len(n.Type.Shape) > 1 {
			if d := n.Type.Shape[1]; strings.HasPrefix(d.Sym, "M/") {
				s.ratios[n.Attrs.Str("name", "")], _ = strconv.Atoi(d.Sym[2:])
			}
		}
	}
	return s, nil
}

func stateShape(sh ir.Shape, opt Options) ([]int, error) {
	dims, err := ir.Bindings{B: int64(opt.Batch), M: int64(opt.MaxLen)}.Dims(sh)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(dims))
	for i, v := range dims {
		out[i] = int(v)
	}
	return out, nil
}

// arena returns the session's activation arena for a program.
func (s *Session) arena(p backends.OldProgram) *backends.HostArena {
	if s.arenas == nil {
		s.arenas = map[backends.OldProgram]*backends.HostArena{}
	}
	a, ok := s.arenas[p]
	if !ok {
		pre, dec := s.opt.callBindings()
		if p == s.m.decode {
			a = backends.NewHostArena(slotSizes(s.m.dg, dec))
		} else {
			a = backends.NewHostArena(slotSizes(s.m.pg, pre))
		}
		s.arenas[p] = a
	}
	return a
}

// ArenaBytes is the activation memory the session's arenas hold.
func (s *Session) ArenaBytes() int64 {
	var n int64
	for _, a := range s.arenas {
		n += a.Bytes()
	}
	return n
}

// State returns a persistent state tensor by name (for traces and tests).
func (s *Session) State(name string) *backends.Tensor { return s.state[name] }

func (s *Session) rope(n *ir.Node, maxLen int) (*backends.Tensor, error) {
	key := fmt.Sprint(n.Attrs)
	if t, ok := s.ropes[key]; ok {
		return t, nil
	}
	a := n.Attrs
	tab := deepseekv4.FreqsCis(int(a.Int("dim", 0)), maxLen, int(a.Int("original_seq_len", 0)),
		a.Float("base", 0), a.Float("factor", 1), a.Float("beta_fast", 32), a.Float("beta_slow", 1))
	t := &backends.Tensor{DType: ir.F32, Shape: []int{maxLen, tab.Pairs, 2}, F32: tab.CosSin}
	s.ropes[key] = t
	return t, nil
}

// Logits are the f32 logits of one call: [B, S, V].
type Logits struct {
	B, S, V int
	Data    []float32
}

// Last returns the logits of the last position of every row, [B][V].
func (l *Logits) Last() [][]float32 {
	out := make([][]float32, l.B)
	for b := range out {
		out[b] = l.Data[(b*l.S+l.S-1)*l.V : (b*l.S+l.S)*l.V]
	}
	return out
}

func (s *Session) call(prog backends.OldProgram, tokens [][]int64, prefix string) (lg *Logits, err error) {
	defer func() {
		if r := recover(); r != nil {
			lg, err = nil, &InternalError{Where: "the " + strings.TrimSuffix(prefix, ".") + " call", Err: fmt.Errorf("%v", r)}
		}
	}()
	B := len(tokens)
	if B != s.opt.Batch {
		return nil, fmt.Errorf("batch of %d rows, the session holds %d", B, s.opt.Batch)
	}
	S := len(tokens[0])
	if S == 0 {
		return nil, fmt.Errorf("empty prompt")
	}
	if s.Pos+S > s.opt.MaxLen {
		return nil, fmt.Errorf("%d tokens at position %d exceed the maximum length %d", S, s.Pos, s.opt.MaxLen)
	}
	ids := &backends.Tensor{DType: ir.I64, Shape: []int{B, S}}
	for b, row := range tokens {
		if len(row) != S {
			return nil, fmt.Errorf("row %d has %d tokens, row 0 has %d", b, len(row), S)
		}
		for t, id := range row {
			if id < 0 || int(id) >= s.m.Vocab {
				return nil, fmt.Errorf("token id %d (row %d, position %d) out of range [0,%d)", id, b, t, s.m.Vocab)
			}
		}
		ids.I64 = append(ids.I64, row...)
	}
	env := &backends.OldEnv{B: B, S: S, M: s.opt.MaxLen, StartPos: s.Pos,
		Inputs: map[string]*backends.Tensor{"tokens": ids, "start_pos": {DType: ir.I64, Shape: []int{}, I64: []int64{int64(s.Pos)}}},
		Weight: s.m.w.weight, State: s.state, Rope: s.rope, Arena: s.arena(prog), OpTimes: s.OpTimes}
	if s.Tracer != nil {
		env.Probe = s.Tracer.probe(prefix, B, S)
	} else if s.observe != nil {
		env.Probe = s.observe
	}
	if err := prog.Run(env); err != nil {
		var kp *backends.KernelPanic
		if errors.As(err, &kp) { // a panic the backend recovered
			return nil, &InternalError{Where: "the " + strings.TrimSuffix(prefix, ".") + " call", Err: err}
		}
		return nil, err
	}
	lg, err = checkLogits(env.Outputs["logits"], B, S, s.Pos, strings.TrimSuffix(prefix, "."))
	if err != nil {
		return nil, err
	}
	s.Pos += S
	return lg, nil
}

// checkLogits checks the logits output of a call named call at position
// pos: present, f32 [B, S, V], and finite. A NaN or Inf would otherwise
// become token 0 (argmax over NaN) and the run would go on producing
// garbage with exit status 0; bad weights or an edited plan are the likely
// cause, so it is reported as bad input (exit 2), naming the first place.
func checkLogits(out *backends.Tensor, B, S, pos int, call string) (*Logits, error) {
	if out == nil {
		return nil, fmt.Errorf("%s: the plan's graph has no logits output", call)
	}
	if out.DType != ir.F32 || len(out.Shape) != 3 || out.Shape[0] != B || out.Shape[1] != S || len(out.F32) != out.NumElements() {
		return nil, fmt.Errorf("%s: logits are %s%v, want f32[%d %d V]", call, out.DType, out.Shape, B, S)
	}
	lg := &Logits{B: B, S: S, V: out.Shape[2], Data: out.F32}
	for i, v := range lg.Data {
		if v-v != 0 { // NaN or ±Inf
			row, t := i/(S*lg.V), i/lg.V%S
			return nil, fmt.Errorf("%s: logits hold %v at row %d, position %d: the weights or the plan are bad", call, v, row, pos+t)
		}
	}
	return lg, nil
}

// Prefill runs the prompt (all rows the same length) from position 0.
func (s *Session) Prefill(tokens [][]int64) (*Logits, error) {
	if s.Pos != 0 {
		return nil, fmt.Errorf("prefill must start at position 0 (session at %d)", s.Pos)
	}
	lg, err := s.call(s.m.prefill, tokens, "prefill.")
	if err == nil && s.Tracer != nil {
		s.Tracer.logits("prefill.", lg, true)
		s.Tracer.caches("after_prefill.", s)
	}
	return lg, err
}

// Decode runs one token per row at the current position.
func (s *Session) Decode(tokens []int64) (*Logits, error) {
	if s.Pos == 0 {
		return nil, fmt.Errorf("decode needs a prefill first")
	}
	rows := make([][]int64, len(tokens))
	for i, t := range tokens {
		rows[i] = []int64{t}
	}
	prefix := fmt.Sprintf("decode%02d.", s.Calls)
	lg, err := s.call(s.m.decode, rows, prefix)
	if err == nil {
		s.Calls++
		if s.Tracer != nil {
			s.Tracer.logits(prefix, lg, false)
			s.Tracer.caches("after_decode.", s)
		}
	}
	return lg, err
}
