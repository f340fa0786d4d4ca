package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// Model is a compiled module bound to a checkpoint and a backend: the
// devices of the backend and its fallbacks, the weights bound on them, and
// each graph placed and prepared (a Runner).
type Model struct {
	Module  *ir.Module
	Dir     string           // the checkpoint directory ("" for a WeightSource)
	Backend string           // the primary backend
	prefill *backends.Runner // the last position's logits (lastLogits)
	decode  *backends.Runner
	// prefillAll runs the plan's prefill graph as it is, every position's
	// logits; made on first use (Session.prefillRunner).
	prefillAll   *backends.Runner
	prefillAllMu *sync.Mutex
	chunk        *backends.Runner // nil: the plan has no chunk graph, or the backend does not run it
	// Placement is where the decode graph's nodes run (what fell back).
	Placement *backends.Placement
	// PrefillPlacement is the prefill graph's.
	PrefillPlacement *backends.Placement
	// ChunkPlacement is the chunk graph's (nil without chunked prefill).
	ChunkPlacement *backends.Placement
	pg, dg, cg     *ir.Graph // prefill and chunk on the last position (lastLogits)
	pgFull         *ir.Graph // the plan's prefill graph: every position's logits
	window         int       // the attention window (the chunk graph's window_idx), 0 without a chunk graph
	w              *binder
	devs           map[string]backends.Device // by backend name
	host           map[string]bool            // the backends whose buffers are host memory
	primaryHost    bool                       // the primary's buffers are host memory
	Vocab          int
}

// Open binds the module's graphs to the checkpoint in dir and prepares them
// on the named backend (and the fallbacks its capabilities name). Every
// weight is bound and checked up front, so a broken checkpoint is reported
// before anything runs.
func Open(m *ir.Module, dir, backend string) (md *Model, err error) {
	return open(m, dir, nil, backend)
}

// OpenSource is Open with the weights from src instead of a checkpoint
// directory (synth.Source for exec -bench -synthetic).
func OpenSource(m *ir.Module, src WeightSource, backend string) (*Model, error) {
	if src == nil {
		return nil, fmt.Errorf("no weight source")
	}
	return open(m, "", src, backend)
}

func open(m *ir.Module, dir string, src WeightSource, backend string) (md *Model, err error) {
	var binding *ir.Node
	defer func() {
		if r := recover(); r != nil {
			where := "opening the model"
			if binding != nil {
				where = fmt.Sprintf("binding weight %q (%%%d)", binding.Attrs.Str("name", ""), binding.ID)
			}
			if md != nil {
				md.Close()
			}
			md, err = nil, &InternalError{Where: where, Err: fmt.Errorf("%v", r)}
		}
	}()
	be, err := backends.Get(backend)
	if err != nil {
		return nil, err
	}
	if err := be.Available(); err != nil {
		return nil, fmt.Errorf("backend %s: unavailable: %v", backend, err)
	}
	full, dg := m.Graph("prefill"), m.Graph("decode")
	if full == nil || dg == nil {
		return nil, fmt.Errorf("plan has no prefill/decode graphs")
	}
	pg, err := lastLogits(full)
	if err != nil {
		return nil, err
	}
	md = &Model{Module: m, Dir: dir, Backend: backend, pg: pg, pgFull: full, dg: dg, prefillAllMu: new(sync.Mutex), devs: map[string]backends.Device{}, host: map[string]bool{}, primaryHost: be.Capabilities().Host}
	if md.PrefillPlacement, err = backends.Schedule(pg, backend); err == nil {
		md.Placement, err = backends.Schedule(dg, backend)
	}
	if cg := m.Graph("chunk"); err == nil && cg != nil && md.primaryHost {
		// Chunked prefill runs on the host backends, whose kernels do the
		// chunk semantics of the stateful ops (a device backend prefills
		// in one call until its kernels do).
		if cg, err = lastLogits(cg); err == nil {
			err = packChunkSlots(cg)
		}
		if err == nil {
			md.cg, md.window = cg, chunkWindow(cg)
			md.ChunkPlacement, err = backends.Schedule(cg, backend)
		}
	}
	if err == nil {
		err = md.checkStates()
	}
	if err == nil {
		err = md.openDevices()
	}
	if err != nil {
		md.Close()
		return nil, err
	}
	if src != nil {
		md.w = openSource(src)
	} else if md.w, err = openCheckpoint(dir); err != nil {
		md.Close()
		return nil, err
	}
	// A token map derived from tokenizer.json is made and checked here, once,
	// before any weight is bound, so a wrong count is refused early.
	if _, _, err := md.w.derivedTokenMapTensor("token_map"); err != nil {
		md.Close()
		return nil, err
	}
	prog := newLoadProgress(md.w, pg, dg) // stderr progress (engine/progress.go)
	defer prog.done()
	for _, pl := range md.placements() {
		for _, n := range pl.Graph.Nodes {
			if n.Op != "weight" {
				continue
			}
			binding = n
			if _, err := md.weight(pl.Backend[n], n); err != nil {
				md.Close()
				return nil, err
			}
			prog.bound(n)
			if n.Attrs.Str("name", "") == "embed.weight" && len(n.Type.Shape) > 0 {
				md.Vocab = int(n.Type.Shape[0].N)
			}
		}
	}
	binding = nil
	if md.prefill, err = backends.NewRunner(md.PrefillPlacement, md.devs); err == nil {
		md.decode, err = backends.NewRunner(md.Placement, md.devs)
	}
	if err == nil && md.ChunkPlacement != nil {
		md.chunk, err = backends.NewRunner(md.ChunkPlacement, md.devs)
	}
	if err != nil {
		md.Close()
		return nil, err
	}
	return md, nil
}

// placements are the graphs' placements: prefill, decode and, when the
// model prefills in chunks, chunk.
func (m *Model) placements() []*backends.Placement {
	pls := []*backends.Placement{m.PrefillPlacement, m.Placement}
	if m.ChunkPlacement != nil {
		pls = append(pls, m.ChunkPlacement)
	}
	return pls
}

// The chunk graph runs on the host backends only, so its arena is planned
// for them: packChunkSlots re-assigns its buffer slots by size
// (backends.PackSlots, at chunkSlotBindings), and hostSkip leaves
// out of a host arena's slot sizes the values the host computes without
// arena storage (backends.HostView; every graph's arena on the host, the
// decode step's included: at 65,536 tokens its slots were planned at 242
// MiB for 2 MiB of values, a cache's rows sizing the slots that small
// values then grew to). The plan's first-free assignment put one of
// a long prompt's indexer tensors ([chunk, P] scores and masks) or a
// cache's rows in most slots: on the mini benchmark model, a chunk of 256
// at 65,536 tokens planned 660 MiB of slots for a peak of about 160 MiB of
// live values.
func packChunkSlots(g *ir.Graph) error {
	b := chunkSlotBindings
	skip := hostSkip(b)
	if err := backends.PackSlots(g, func(n *ir.Node) backends.SlotNeed { return backends.SlotNeeds(n, b, skip) }); err != nil {
		return err
	}
	if err := ir.CheckBuffers(g); err != nil {
		return fmt.Errorf("the chunk graph's slots by size: %v", err)
	}
	return nil
}

// chunkSlotBindings are the representative sizes packChunkSlots orders the
// values by: a chunk of the default length late in a long prompt, where the
// indexer's [chunk, P] tensors are the largest.
var chunkSlotBindings = ir.Bindings{B: 1, S: DefaultPrefillChunk, M: 1 << 16, P: 1<<16 - DefaultPrefillChunk}

// onHost reports whether every segment of pl runs on a host backend (one
// arena of host memory, the cpu backends' kernels).
func (m *Model) onHost(pl *backends.Placement) bool {
	for _, seg := range pl.Segments {
		if !m.host[seg.Backend] {
			return false
		}
	}
	return true
}

// hostSkip is backends.HostView at b: what a host arena's slots are sized
// without.
func hostSkip(b ir.Bindings) func(*ir.Node) bool {
	return func(n *ir.Node) bool { return backends.HostView(n, b) }
}

// chunkWindow is the attention window of a chunk graph (its window_idx
// nodes' attribute).
func chunkWindow(g *ir.Graph) int {
	for _, n := range g.Nodes {
		if n.Op == "window_idx" {
			return int(n.Attrs.Int("window", 0))
		}
	}
	return 0
}

// checkStates refuses placements that keep a state on different backends
// in the graphs (a session holds each state once).
func (m *Model) checkStates() error {
	where := map[string]string{}
	for _, n := range m.pg.Nodes {
		if n.Op == "state" {
			where[n.Attrs.Str("name", "")] = m.PrefillPlacement.Backend[n]
		}
	}
	for _, pl := range m.placements()[1:] {
		for _, n := range pl.Graph.Nodes {
			name := n.Attrs.Str("name", "")
			if be, ok := where[name]; n.Op == "state" && ok && be != pl.Backend[n] {
				return fmt.Errorf("backend %s: state %q lives on %s in the prefill graph and on %s in the %s graph", m.Backend, name, be, pl.Backend[n], pl.Graph.Name)
			}
		}
	}
	return nil
}

// openDevices opens the device of every backend the placements use.
func (m *Model) openDevices() error {
	for _, pl := range m.placements() {
		for _, seg := range pl.Segments {
			if _, ok := m.devs[seg.Backend]; ok {
				continue
			}
			be, err := backends.Get(seg.Backend)
			if err != nil {
				return err
			}
			if err := be.Available(); err != nil {
				return fmt.Errorf("backend %s (the fallback of %s): unavailable: %v", seg.Backend, m.Backend, err)
			}
			d, err := be.Open()
			if err != nil {
				return fmt.Errorf("backend %s: %w", seg.Backend, err)
			}
			m.devs[seg.Backend] = d
			m.host[seg.Backend] = be.Capabilities().Host
		}
	}
	return nil
}

// weight is the buffer of weight node n on backend be's device.
func (m *Model) weight(be string, n *ir.Node) (backends.Buffer, error) {
	d, ok := m.devs[be]
	if !ok {
		return nil, fmt.Errorf("weight %q: no device for backend %s", n.Attrs.Str("name", ""), be)
	}
	return m.w.weight(be, d, n)
}

// PrefillGraph is the prefill graph sessions run by default: the plan's,
// its head on the last position (lastLogits).
func (m *Model) PrefillGraph() *ir.Graph { return m.pg }

// Device is the primary backend's device (for reports: Describe, Memory).
func (m *Model) Device() backends.Device { return m.devs[m.Backend] }

// Close frees the devices (their buffers) and the mapped checkpoint.
func (m *Model) Close() {
	for name, d := range m.devs {
		d.Close()
		delete(m.devs, name)
	}
	if m.w != nil {
		m.w.close()
	}
}

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
	// PrefillBatch is the rows of a prefill call when fewer than Batch (a
	// Batch prefills one slot at a time), for the estimate and the arena.
	PrefillBatch int
	// PrefillChunk, when > 0, runs a prompt longer than it (and than the
	// attention window) as calls of at most PrefillChunk tokens through
	// the chunk graph, with the bits of one prefill call (Session.Prefill);
	// the activation memory is then that of a chunk, not of the prompt.
	// 0: one call. Models without a chunk graph (older plans, device
	// backends) ignore it. DefaultPrefillChunk is what exec and serve use.
	PrefillChunk int
	// FullLogits makes a prefill compute every position's logits
	// ([B,S,V]); otherwise only the last position's ([B,1,V]), which is
	// all generation reads. A tracer implies it; prefill is then one call.
	FullLogits bool
	// FullRows turns bounded replay off: a prompt call whose last logits
	// alone are wanted computes every layer on every row anyway. With it
	// off (the default) the cpu backends compute each node the plan's
	// bounded-rows pass marked on the prompt's last rows it needs only
	// (passes.BoundedRows: the last layers, after the last one whose
	// caches later layers read, on the last token's window dependency
	// cone), with the same last logits and caches.
	FullRows bool
	// MaxMemory caps the bytes the session may need (engine/memory.go):
	// 0 = MemAvailable of /proc/meminfo, < 0 = no check.
	MaxMemory int64
}

// Session is one batch of sequences and their caches, on the devices of
// the model's placement.
type Session struct {
	m      *Model
	opt    Options
	state  map[string]backends.Buffer   // each on the device its state node runs on
	stDev  map[string]string            // the backend of each state
	ropes  map[string]backends.Buffer   // by backend and attributes
	ropeOf map[ropeNode]backends.Buffer // the same tables by backend and node
	ropeMu sync.Mutex                   // a Batch's concurrent calls share the tables
	Pos    int                          // tokens processed so far
	Calls  int                          // decode calls so far
	Tracer *Tracer
	// replay, when set, makes the prompt call it is set around a bounded
	// replay ending tail rows before the prompt's end (backends.Env.Replay).
	replay bool
	tail   int
	arenas map[*backends.Runner]map[string]backends.Arena
	ratios map[string]int // compression ratio of each cache, from its M/r rows

	// OpTimes, when not nil, accumulates each op's kernel wall time.
	OpTimes map[string]*backends.OpTime
	// NodeTimes, when not nil, accumulates it by node (devices that time
	// nodes fill it: the host devices do).
	NodeTimes map[*ir.Node]*backends.OpTime

	// Observer, when set (and Tracer is nil), sees the probe values it
	// wants (a benchmark counting the experts chosen).
	Observer *Observer
}

// Observer sees probe values during calls: Wants picks them by name (only
// those are read back from the device), See receives them.
type Observer struct {
	Wants func(name string) bool
	See   func(name string, t *backends.Tensor)
}

// NewSession allocates the caches for a batch and a maximum length.
func (m *Model) NewSession(opt Options) (*Session, error) {
	if opt.Batch <= 0 || opt.MaxLen <= 0 {
		return nil, fmt.Errorf("batch %d and maximum length %d must be positive", opt.Batch, opt.MaxLen)
	}
	if err := m.checkMemory(opt); err != nil {
		return nil, err
	}
	s := &Session{m: m, opt: opt, state: map[string]backends.Buffer{}, stDev: map[string]string{}, ropes: map[string]backends.Buffer{}, ratios: map[string]int{}}
	for _, n := range m.pg.Nodes {
		if n.Op != "state" {
			continue
		}
		name := n.Attrs.Str("name", "")
		if err := s.allocState(n, name); err != nil {
			s.Close()
			return nil, err
		}
		if len(n.Type.Shape) > 1 {
			if d := n.Type.Shape[1]; strings.HasPrefix(d.Sym, "M/") {
				s.ratios[name], _ = strconv.Atoi(d.Sym[2:])
			}
		}
	}
	return s, nil
}

// allocState makes state n on its device: zeroed, or -inf for a
// compressor score (made on the host and uploaded).
func (s *Session) allocState(n *ir.Node, name string) error {
	shape, err := stateShape(n.Type.Shape, s.opt)
	if err != nil {
		return fmt.Errorf("state %s: %v", name, err)
	}
	be := s.m.PrefillPlacement.Backend[n]
	d := s.m.devs[be]
	var b backends.Buffer
	if negInfState(n) {
		b, err = d.Upload(freshState(n, shape))
	} else {
		b, err = d.Alloc(n.Type.DType, shape)
	}
	if err != nil {
		return fmt.Errorf("backend %s: state %s: %w", be, name, err)
	}
	s.state[name], s.stDev[name] = b, be
	return nil
}

// negInfState reports whether state n starts at -inf (a compressor score)
// rather than zero.
func negInfState(n *ir.Node) bool {
	return n.Attrs.Str("kind", "") == "compressor_score" && n.Type.DType.IsFloat()
}

// freshState is the host value of state n (or a row of it, shape) in a new
// session: zero, or -inf for a compressor score.
func freshState(n *ir.Node, shape []int) *backends.Tensor {
	t := backends.ZeroTensor(n.Type.DType, shape)
	if negInfState(n) {
		for i := range t.F32 {
			t.F32[i] = float32(math.Inf(-1))
		}
	}
	return t
}

// Close frees the session's buffers (state, RoPE tables, arenas) on the
// devices; the session cannot be used afterwards.
func (s *Session) Close() {
	for name, b := range s.state {
		s.m.devs[s.stDev[name]].Free(b)
	}
	for key, b := range s.ropes {
		be, _, _ := strings.Cut(key, "|")
		s.m.devs[be].Free(b)
	}
	closed := map[backends.Arena]bool{} // the host backends share one
	for _, m := range s.arenas {
		for _, a := range m {
			if !closed[a] {
				closed[a] = true
				a.Close()
			}
		}
	}
	s.state, s.ropes, s.ropeOf, s.arenas = map[string]backends.Buffer{}, map[string]backends.Buffer{}, nil, nil
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

// arenasFor returns the session's activation arenas for a graph's runner,
// one per device it runs on; the host backends share one (host memory,
// whose slots the plan assigned over the whole graph).
func (s *Session) arenasFor(r *backends.Runner) (map[string]backends.Arena, error) {
	if s.arenas == nil {
		s.arenas = map[*backends.Runner]map[string]backends.Arena{}
	}
	if a, ok := s.arenas[r]; ok {
		return a, nil
	}
	a, err := s.newRunnerArenas(r)
	if err != nil {
		return nil, err
	}
	s.arenas[r] = a
	return a, nil
}

// newRunnerArenas makes fresh activation arenas for r's calls, their slots
// sized for this session's prefill or decode bindings (arenasFor's, and a
// batch lane's own).
func (s *Session) newRunnerArenas(r *backends.Runner) (map[string]backends.Arena, error) {
	pre, dec := s.m.callBindings(s.opt)
	bind := pre
	var skip func(*ir.Node) bool
	switch r {
	case s.m.decode:
		bind = dec
	case s.m.chunk:
		bind = s.m.chunkBindings(s.opt)
	}
	if s.m.onHost(r.Placement()) {
		skip = hostSkip(bind)
	}
	return s.m.newArenas(r.Placement(), backends.SlotSizes(r.Placement().Graph, bind, skip), "the activation arena")
}

// newArenas makes one arena of the slot sizes per device of the placement;
// the host backends share one (host memory, whose slots the plan assigned
// over the whole graph). On an error the arenas made so far are closed.
func (m *Model) newArenas(pl *backends.Placement, sizes []backends.SlotSize, what string) (map[string]backends.Arena, error) {
	a := map[string]backends.Arena{}
	var host backends.Arena
	for _, seg := range pl.Segments {
		if _, ok := a[seg.Backend]; ok {
			continue
		}
		if m.host[seg.Backend] && host != nil {
			a[seg.Backend] = host
			continue
		}
		ar, err := m.devs[seg.Backend].NewArena(sizes)
		if err != nil {
			closed := map[backends.Arena]bool{}
			for _, x := range a {
				if !closed[x] {
					closed[x] = true
					x.Close()
				}
			}
			return nil, fmt.Errorf("backend %s: %s: %w", seg.Backend, what, err)
		}
		a[seg.Backend] = ar
		if m.host[seg.Backend] {
			host = ar
		}
	}
	return a, nil
}

// StateBytes is the memory the session's state holds (caches, compressor
// states, Engram history), as its devices report it.
func (s *Session) StateBytes() int64 {
	var n int64
	for _, b := range s.state {
		n += b.Bytes()
	}
	return n
}

// ArenaBytes is the activation memory the session's arenas hold.
func (s *Session) ArenaBytes() int64 {
	var n int64
	seen := map[backends.Arena]bool{}
	for _, m := range s.arenas {
		for _, a := range m {
			if !seen[a] {
				seen[a] = true
				n += a.Bytes()
			}
		}
	}
	return n
}

// State returns a persistent state tensor by name in host memory (for
// traces and tests; a host backend's own tensor, not a copy), or nil.
func (s *Session) State(name string) *backends.Tensor {
	b, ok := s.state[name]
	if !ok {
		return nil
	}
	t, err := s.m.devs[s.stDev[name]].Download(b)
	if err != nil {
		return nil
	}
	return t
}

// StateDigest is a hash (FNV-1a, 64 bits, hex) of every state's bits in
// name order: two sessions whose caches, compressor states and Engram
// history hold the same bits have the same digest.
func (s *Session) StateDigest() string {
	names := make([]string, 0, len(s.state))
	for name := range s.state {
		names = append(names, name)
	}
	sort.Strings(names)
	h := fnv.New64a()
	var b [8]byte
	for _, name := range names {
		h.Write([]byte(name))
		t := s.State(name)
		if t == nil {
			continue
		}
		for _, v := range t.F32 {
			binary.LittleEndian.PutUint32(b[:4], math.Float32bits(v))
			h.Write(b[:4])
		}
		for _, v := range t.I64 {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			h.Write(b[:])
		}
		h.Write(t.U8)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// FloatDigest is StateDigest's hash of float bits.
func FloatDigest(rows ...[]float32) string {
	h := fnv.New64a()
	var b [4]byte
	for _, r := range rows {
		for _, v := range r {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// rope returns the RoPE table of node n on backend be's device: computed
// on the host once per session and uploaded.
func (s *Session) rope(be string, n *ir.Node) (backends.Buffer, error) {
	s.ropeMu.Lock()
	defer s.ropeMu.Unlock()
	nk := ropeNode{be, n}
	if t, ok := s.ropeOf[nk]; ok { // a ragged step asks once per row: no fmt on that path
		return t, nil
	}
	key := be + "|" + fmt.Sprint(n.Attrs)
	if t, ok := s.ropes[key]; ok {
		if s.ropeOf == nil {
			s.ropeOf = map[ropeNode]backends.Buffer{}
		}
		s.ropeOf[nk] = t
		return t, nil
	}
	a, maxLen := n.Attrs, s.opt.MaxLen
	tab := deepseekv4.FreqsCis(int(a.Int("dim", 0)), maxLen, int(a.Int("original_seq_len", 0)),
		a.Float("base", 0), a.Float("factor", 1), a.Float("beta_fast", 32), a.Float("beta_slow", 1))
	b, err := s.m.devs[be].Upload(&backends.Tensor{DType: ir.F32, Shape: []int{maxLen, tab.Pairs, 2}, F32: tab.CosSin})
	if err != nil {
		return nil, fmt.Errorf("backend %s: the RoPE table: %w", be, err)
	}
	s.ropes[key] = b
	if s.ropeOf == nil {
		s.ropeOf = map[ropeNode]backends.Buffer{}
	}
	s.ropeOf[nk] = b
	return b, nil
}

// ropeNode keys a RoPE table by backend and node.
type ropeNode struct {
	be string
	n  *ir.Node
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

func (s *Session) call(r *backends.Runner, tokens [][]int64, prefix string) (lg *Logits, err error) {
	// (a chunk call computes its rows as one prefill call of the prompt
	// would: backends.Call.Chunk)
	call := strings.TrimSuffix(prefix, ".")
	defer func() {
		if rec := recover(); rec != nil {
			lg, err = nil, &InternalError{Where: "the " + call + " call", Err: fmt.Errorf("%v", rec)}
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
	arenas, err := s.arenasFor(r)
	if err != nil {
		return nil, err
	}
	if r == s.m.chunk { // a long prompt's chunk (heap.go)
		boundHeap(arenas)
	}
	c := &backends.Call{B: B, S: S, M: s.opt.MaxLen, StartPos: s.Pos,
		Inputs: map[string]*backends.Tensor{"tokens": ids, "start_pos": {DType: ir.I64, Shape: []int{}, I64: []int64{int64(s.Pos)}}},
		Weight: s.m.weight, State: s.state, Rope: s.rope, Arenas: arenas, OpTimes: s.OpTimes, NodeTimes: s.NodeTimes, Chunk: r == s.m.chunk || S > 1,
		Replay: s.replay && B == 1, Tail: s.tail}
	var forced []forcedValue
	c.Probe = s.probe(prefix, B, S, &forced)
	outs, err := r.Run(c)
	for _, f := range forced {
		f.d.Free(f.b)
	}
	if err != nil {
		var kp *backends.KernelPanic
		if errors.As(err, &kp) { // a panic the backend recovered
			return nil, &InternalError{Where: "the " + call + " call", Err: err}
		}
		return nil, err
	}
	out, err := s.download(r, outs, "logits")
	if err != nil {
		return nil, fmt.Errorf("%s: reading the logits: %w", call, err)
	}
	// (a chunk before the prompt's last in a bounded replay: its logits
	// are not wanted, and the head's rows were left uncomputed)
	if lg, err = checkLogits(out, B, S, s.Pos, call, !(c.Replay && s.tail > 0)); err != nil {
		return nil, err
	}
	s.Pos += S
	return lg, nil
}

// forcedValue is a teacher-forced probe value uploaded for one call.
type forcedValue struct {
	d backends.Device
	b backends.Buffer
}

// probe is the call's probe callback: nil when nothing reads probes (they
// stay views); else it reads back only the values the tracer records or
// replaces, or the observer wants.
func (s *Session) probe(prefix string, B, S int, forced *[]forcedValue) func(backends.Device, string, bool, backends.Buffer) (backends.Buffer, error) {
	tr, ob := s.Tracer, s.Observer
	switch {
	case tr != nil && (tr.Record || tr.Teacher != nil):
		see := tr.probe(prefix, B, S)
		return func(d backends.Device, name string, force bool, v backends.Buffer) (backends.Buffer, error) {
			if !tr.Record && !force {
				return v, nil
			}
			t, err := d.Download(v)
			if err != nil {
				return nil, err
			}
			r, err := see(name, force, t)
			if err != nil || r == t {
				return v, err
			}
			b, err := d.Upload(r)
			if err == nil {
				*forced = append(*forced, forcedValue{d, b})
			}
			return b, err
		}
	case tr == nil && ob != nil:
		return func(d backends.Device, name string, _ bool, v backends.Buffer) (backends.Buffer, error) {
			if ob.Wants(name) {
				t, err := d.Download(v)
				if err != nil {
					return nil, err
				}
				ob.See(name, t)
			}
			return v, nil
		}
	}
	return nil
}

// download reads a graph output back from the device that made it.
func (s *Session) download(r *backends.Runner, outs map[string]backends.Buffer, name string) (*backends.Tensor, error) {
	b, ok := outs[name]
	if !ok || b == nil {
		return nil, nil
	}
	pl := r.Placement()
	for _, o := range pl.Graph.Outputs {
		if o.Name == name {
			return s.m.devs[pl.Backend[o.Node]].Download(b)
		}
	}
	return nil, nil
}

// checkLogits checks the logits output of a call named call at position
// pos: present, f32 [B, S, V] or, from a graph on the last position
// (lastLogits), [B, 1, V], and finite. A NaN or Inf would otherwise
// become token 0 (argmax over NaN) and the run would go on producing
// garbage with exit status 0; bad weights or an edited plan are the likely
// cause, so it is reported as bad input (exit 2), naming the first place.
func checkLogits(out *backends.Tensor, B, S, pos int, call string, finite bool) (*Logits, error) {
	if out == nil {
		return nil, fmt.Errorf("%s: the plan's graph has no logits output", call)
	}
	if out.DType != ir.F32 || len(out.Shape) != 3 || out.Shape[0] != B || (out.Shape[1] != S && out.Shape[1] != 1) || len(out.F32) != out.NumElements() {
		return nil, fmt.Errorf("%s: logits are %s%v, want f32[%d %d V]", call, out.DType, out.Shape, B, S)
	}
	rows := out.Shape[1]
	lg := &Logits{B: B, S: rows, V: out.Shape[2], Data: out.F32}
	for i, v := range lg.Data {
		if !finite {
			break
		}
		if v-v != 0 { // NaN or ±Inf
			row, t := i/(rows*lg.V), i/lg.V%rows
			return nil, fmt.Errorf("%s: logits hold %v at row %d, position %d: the weights or the plan are bad", call, v, row, pos+S-rows+t)
		}
	}
	return lg, nil
}

// Prefill runs the prompt (all rows the same length) from position 0: one
// call of the prefill graph, or, when the session prefills in chunks
// (Options.PrefillChunk) and the prompt is longer than a chunk, calls of
// the chunk graph (Session.chunked); their logits are the last chunk's.
func (s *Session) Prefill(tokens [][]int64) (*Logits, error) {
	if s.Pos != 0 {
		return nil, fmt.Errorf("prefill must start at position 0 (session at %d)", s.Pos)
	}
	if n := s.chunkLen(tokens); n > 0 {
		return s.chunked(tokens, n)
	}
	r, err := s.prefillRunner()
	if err != nil {
		return nil, err
	}
	s.replay, s.tail = s.bounded(), 0
	lg, err := s.call(r, tokens, "prefill.")
	s.replay = false
	if err == nil && s.Tracer != nil {
		s.Tracer.logits("prefill.", lg, true)
		s.Tracer.caches("after_prefill.", s)
	}
	return lg, err
}

// fullLogits reports whether the session's prefills compute every
// position's logits.
func (s *Session) fullLogits() bool { return s.opt.FullLogits || s.Tracer != nil }

// bounded reports whether the session's prompt calls are bounded replays
// (Options.FullRows): they return the last position's logits only and no
// tracer watches their rows.
func (s *Session) bounded() bool { return !s.opt.FullRows && !s.fullLogits() }

// prefillRunner is the runner of the session's prefill calls: the plan's
// prefill graph when every position's logits are wanted (made on first
// use), the last position's form otherwise.
func (s *Session) prefillRunner() (*backends.Runner, error) {
	if !s.fullLogits() {
		return s.m.prefill, nil
	}
	m := s.m
	m.prefillAllMu.Lock()
	defer m.prefillAllMu.Unlock()
	if m.prefillAll == nil {
		pl, err := backends.Schedule(m.pgFull, m.Backend)
		if err == nil {
			m.prefillAll, err = backends.NewRunner(pl, m.devs)
		}
		if err != nil {
			return nil, fmt.Errorf("preparing the prefill graph with every position's logits: %w", err)
		}
	}
	return m.prefillAll, nil
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

// chunkLen is the chunk size a prompt of tokens is prefilled with, 0 for
// one call: chunking is on (Options.PrefillChunk, a chunk graph), the
// prompt is longer than a chunk and at least a window long (a prefill of
// fewer tokens lists min(S, window) window entries per query, a chunk
// window: the attention's blocks would differ), and no tracer records
// the prefill's positions.
func (s *Session) chunkLen(tokens [][]int64) int {
	c := s.opt.ChunkSize() // the chunk the session's arenas were sized for
	if s.m.chunk == nil || c <= 0 || s.Tracer != nil || len(tokens) == 0 {
		return 0
	}
	if S := len(tokens[0]); S <= c || S < s.m.window {
		return 0
	}
	return c
}

// maxChunkScores bounds a chunk's index scores of a long prompt: the
// indexer's [chunk, prompt] tensors (score, mask, candidates) grow with
// the product, so the chunks of a session for long prompts (its
// PrefillLen, Options.ChunkSize) shrink (halving, to no fewer than 256
// tokens) until chunk × prompt is at most this: chunks of 2,048
// up to 8K tokens, 256 at 64K (mini at 64K: 157 MiB of chunk arena at 256
// against 1.25 GiB at 2,048, bench/README.md, issue 16). The results do
// not depend on the chunk size.
const maxChunkScores = 1 << 24

// longPromptChunk is the chunk size, at most c, for a prompt of S tokens.
func longPromptChunk(c, S int) int {
	for c/2 >= 256 && c*S > maxChunkScores {
		c /= 2
	}
	return c
}

// chunked prefills tokens from position 0 in calls of at most n tokens of
// the chunk graph. Each call reads what the earlier ones left in the window
// ring, the compressor states and the caches, and lays out the attention's
// index lists as one prefill call does, so that the last position's logits
// and every cache a later call reads have the bits of the unchunked
// prefill (the cpu backend's matmuls compute a chunk's rows as a long call
// does, backends.Call.Chunk; its fp8 experts, which pick their kernels by
// each expert's rows, are the exception).
func (s *Session) chunked(tokens [][]int64, n int) (*Logits, error) {
	S := len(tokens[0])
	for b := range tokens {
		if len(tokens[b]) != S {
			return nil, fmt.Errorf("row %d has %d tokens, row 0 has %d", b, len(tokens[b]), S)
		}
	}
	if S > s.opt.MaxLen {
		return nil, fmt.Errorf("%d tokens at position 0 exceed the maximum length %d", S, s.opt.MaxLen)
	}
	var lg *Logits
	p := 0
	prog := newPrefillProgress(S) // stderr progress on a terminal (engine/progress.go)
	for i, size := range chunkSizes(S, n) {
		rows := make([][]int64, len(tokens))
		for b := range tokens {
			rows[b] = tokens[b][p : p+size]
		}
		var err error
		s.replay, s.tail = s.bounded(), S-(p+size)
		lg, err = s.call(s.m.chunk, rows, "chunk.")
		s.replay = false
		if err != nil {
			if i > 0 {
				return nil, fmt.Errorf("prefill chunk at position %d: %w", p, err)
			}
			return nil, err
		}
		p += size
		prog.done(p)
	}
	return lg, nil
}

// DefaultPrefillChunk is the chunk size of exec and serve (-prefill-chunk):
// the activations of a chunk of 2,048 tokens are a few hundred MiB at the
// released widths, and a longer chunk gains little speed.
const DefaultPrefillChunk = 2048

// chunkSizes splits a prompt of S tokens into as many calls as chunks of
// at most n tokens need, of sizes as equal as may be (no short last call).
func chunkSizes(S, n int) []int {
	calls := (S + n - 1) / n
	out := make([]int, calls)
	for i := range out {
		out[i] = S / calls
		if i < S%calls {
			out[i]++
		}
	}
	return out
}
