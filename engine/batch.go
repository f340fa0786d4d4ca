package engine

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// BatchOptions sizes a batch: Slots rows that advance independently, each
// up to MaxLen tokens; MaxMemory caps the bytes as Options.MaxMemory does.
type BatchOptions struct {
	Slots, MaxLen int
	MaxMemory     int64
	// PrefillChunk is Options.PrefillChunk of the slots' prefills.
	PrefillChunk int
	// PerSlot makes one session per slot even where the backends run rows
	// at different positions: what backends without row views get, asked
	// for to compare the two.
	PerSlot bool
}

// Batch is Slots sequences that advance independently (continuous
// batching): each slot is a row of the state, with its own position. A
// slot is prefilled alone (B = 1, on views of its rows of the state);
// decode steps run the listed slots together, each at its own position
// (backends.Runner.RunRows), or as one uniform call when they are rows
// 0..Slots-1 at one position. On backends without row views (cuda, for
// now: Ragged is false) each slot is a session of its own and a Step runs
// the listed slots one after the other (correct, not batched). Like a
// Session, a Batch is used by one goroutine at a time.
type Batch struct {
	s      *Session
	pos    []int
	views  []map[string]backends.Buffer // each slot's rows of the state
	ragged bool
	opt    BatchOptions
	lone   []*Session // !ragged: each slot's session (nil until prefilled)
	// lanes are what each of the calls that run side by side owns (lane 0
	// is the session's arenas): a ragged step's row groups, concurrent
	// prefills.
	lanes []*lane
	// fresh is a fresh row of each state (for reset), on its device.
	fresh   map[string]backends.Buffer
	freshMu sync.Mutex // (prefills side by side reset their slots)
}

// lane is one of a batch's side-by-side calls: its activation arenas by
// runner (lane 0: the session's) and those of its ragged steps' per-row
// runs (by backend; the host backends share one).
type lane struct {
	arenas    map[*backends.Runner]map[string]backends.Arena
	rowArenas []map[string]backends.Arena // one per row of its ragged steps
	scratch   backends.RowScratch
}

// NewBatch allocates the state of o.Slots rows.
func (m *Model) NewBatch(o BatchOptions) (*Batch, error) {
	if o.Slots <= 0 {
		return nil, fmt.Errorf("batch of %d slots: must be positive", o.Slots)
	}
	ragged := !o.PerSlot && backends.RowsCapable(m.Placement, m.devs) && backends.RowsCapable(m.PrefillPlacement, m.devs)
	if ragged {
		_, _, err := m.decode.RowSegments() // prepares the ragged cut once; a graph it cannot split runs a session per slot
		ragged = err == nil
	}
	return m.newBatch(o, ragged)
}

// newBatch is NewBatch with row views (ragged) or a session per slot.
func (m *Model) newBatch(o BatchOptions, ragged bool) (*Batch, error) {
	if !ragged {
		// One session per slot, made on its first Prefill: the memory of
		// all of them is checked now.
		if err := m.checkMemory(Options{Batch: o.Slots, MaxLen: o.MaxLen, MaxMemory: o.MaxMemory, PrefillChunk: o.PrefillChunk}); err != nil {
			return nil, err
		}
		return &Batch{pos: make([]int, o.Slots), opt: o, lone: make([]*Session, o.Slots), s: &Session{m: m, opt: Options{Batch: o.Slots, MaxLen: o.MaxLen, PrefillChunk: o.PrefillChunk}}}, nil
	}
	s, err := m.NewSession(Options{Batch: o.Slots, MaxLen: o.MaxLen, MaxMemory: o.MaxMemory, PrefillBatch: 1, PrefillChunk: o.PrefillChunk})
	if err != nil {
		return nil, err
	}
	b := &Batch{s: s, pos: make([]int, o.Slots), views: make([]map[string]backends.Buffer, o.Slots), ragged: true, opt: o}
	for slot := range b.views {
		b.views[slot] = map[string]backends.Buffer{}
		for name, buf := range s.state {
			v, err := m.devs[s.stDev[name]].(backends.RowDevice).RowView(buf, slot)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("state %s: %w", name, err)
			}
			b.views[slot][name] = v
		}
	}
	return b, nil
}

// Slots is the number of rows.
func (b *Batch) Slots() int { return len(b.pos) }

// Pos is the number of tokens slot holds.
func (b *Batch) Pos(slot int) int {
	if slot < 0 || slot >= len(b.pos) {
		return 0
	}
	return b.pos[slot]
}

// Free marks slot reusable (Prefill resets it).
func (b *Batch) Free(slot int) {
	if slot >= 0 && slot < len(b.pos) {
		b.pos[slot] = 0
		if b.lone != nil && b.lone[slot] != nil {
			b.lone[slot].Close()
			b.lone[slot] = nil
		}
	}
}

// Close frees the batch's buffers.
func (b *Batch) Close() error {
	if b.lone != nil {
		for i, s := range b.lone {
			if s != nil {
				s.Close()
				b.lone[i] = nil
			}
		}
		return nil
	}
	closed := map[backends.Arena]bool{}
	closeAll := func(m map[string]backends.Arena) {
		for _, a := range m {
			if !closed[a] {
				closed[a] = true
				a.Close()
			}
		}
	}
	for i, l := range b.lanes {
		for _, m := range l.rowArenas {
			closeAll(m)
		}
		l.scratch.Free()
		if i > 0 { // lane 0's call arenas are the session's
			for _, m := range l.arenas {
				closeAll(m)
			}
		}
	}
	b.lanes = nil
	for name, up := range b.fresh {
		b.s.m.devs[b.s.stDev[name]].Free(up)
	}
	b.fresh = nil
	b.s.Close()
	return nil
}

// lane returns lane i, made on first use.
func (b *Batch) lane(i int) *lane {
	for len(b.lanes) <= i {
		b.lanes = append(b.lanes, &lane{arenas: map[*backends.Runner]map[string]backends.Arena{}})
	}
	return b.lanes[i]
}

// arenasFor returns lane i's activation arenas of runner r's calls (lane
// 0: the session's), made on first use with the session's sizes.
func (b *Batch) arenasFor(i int, r *backends.Runner) (map[string]backends.Arena, error) {
	if i == 0 {
		return b.s.arenasFor(r)
	}
	l := b.lane(i)
	if a, ok := l.arenas[r]; ok {
		return a, nil
	}
	a, err := b.s.newRunnerArenas(r)
	if err != nil {
		return nil, err
	}
	l.arenas[r] = a
	return a, nil
}

// rowArenasFor returns lane i's arenas of the per-row runs of a ragged
// decode step of rows rows, one per row (each sized for one row), made on
// first use.
func (b *Batch) rowArenasFor(i int, r *backends.Runner, rows int) ([]map[string]backends.Arena, error) {
	l := b.lane(i)
	s := b.s
	for len(l.rowArenas) < rows {
		_, dec := Options{Batch: 1, MaxLen: s.opt.MaxLen}.callBindings()
		a, err := s.m.newArenas(r.Placement(), backends.SlotSizes(r.Placement().Graph, dec, nil), "the per-row activation arena")
		if err != nil {
			return nil, err
		}
		l.rowArenas = append(l.rowArenas, a)
	}
	return l.rowArenas[:rows], nil
}

// Ragged reports whether the backends run rows at different positions in
// one call (the host backends do; cuda does not yet). When false, each
// slot is a session of its own and Step runs the listed slots one by one.
func (b *Batch) Ragged() bool { return b.ragged }

// reset zeroes slot's rows of the state (a fresh session's state: -inf
// for a compressor score).
func (b *Batch) reset(slot int) error {
	s := b.s
	for _, n := range s.m.pg.Nodes {
		if n.Op != "state" {
			continue
		}
		name := n.Attrs.Str("name", "")
		view, ok := b.views[slot][name]
		if !ok {
			continue
		}
		d := s.m.devs[s.stDev[name]]
		up, err := b.freshRow(n, name, view, d)
		if err != nil {
			return fmt.Errorf("backend %s: state %s: %w", s.stDev[name], name, err)
		}
		if err := d.(backends.RowDevice).CopyRow(s.state[name], slot, up); err != nil {
			return fmt.Errorf("backend %s: state %s: %w", s.stDev[name], name, err)
		}
	}
	return nil
}

// freshRow is one row of state name's fresh value on d, made once (every
// reset copies it: a prefill allocated the rows of every state before).
func (b *Batch) freshRow(n *ir.Node, name string, view backends.Buffer, d backends.Device) (backends.Buffer, error) {
	b.freshMu.Lock()
	defer b.freshMu.Unlock()
	if up, ok := b.fresh[name]; ok {
		return up, nil
	}
	_, sh := view.Type()
	up, err := d.Upload(freshState(n, sh))
	if err != nil {
		return nil, err
	}
	if b.fresh == nil {
		b.fresh = map[string]backends.Buffer{}
	}
	b.fresh[name] = up
	return up, nil
}

// Prefill resets slot and runs its prompt at positions 0..len-1 (the other
// slots' state is untouched); it returns the logits of the prompt's last
// position (the caller's to keep).
func (b *Batch) Prefill(slot int, tokens []int64) (logits []float32, err error) {
	if slot < 0 || slot >= len(b.pos) {
		return nil, fmt.Errorf("slot %d of a batch of %d", slot, len(b.pos))
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("empty prompt")
	}
	if len(tokens) > b.s.opt.MaxLen {
		return nil, fmt.Errorf("%d tokens exceed the maximum length %d", len(tokens), b.s.opt.MaxLen)
	}
	b.pos[slot] = 0
	if !b.ragged {
		return b.prefillLone(slot, tokens)
	}
	return b.prefillOn(0, slot, tokens)
}

// prefillOn is Prefill of a ragged batch in lane lane.
func (b *Batch) prefillOn(lane, slot int, tokens []int64) ([]float32, error) {
	if err := b.reset(slot); err != nil {
		return nil, err
	}
	var lg *Logits
	var err error
	if n := b.s.chunkLen([][]int64{tokens}); n > 0 { // in chunks (Session.chunked)
		p := 0
		for _, size := range chunkSizes(len(tokens), n) {
			if lg, err = b.runPrompt(lane, b.s.m.chunk, "chunk", tokens[p:p+size], p, slot, len(tokens)-(p+size)); err != nil {
				return nil, err
			}
			p += size
		}
	} else if lg, err = b.runPrompt(lane, b.s.m.prefill, "prefill", tokens, 0, slot, 0); err != nil {
		return nil, err
	}
	b.pos[slot] = len(tokens)
	return slices.Clone(lg.Last()[0]), nil
}

// PrefillMany is Prefill of each listed slot with its prompt (slots
// distinct), the prefills side by side, one per core, on a ragged batch
// (else one after the other); logits[i] and errs[i] belong to slots[i]. A
// failed prefill fails only its slot.
func (b *Batch) PrefillMany(slots []int, prompts [][]int64) (logits [][]float32, errs []error) {
	logits, errs = make([][]float32, len(slots)), make([]error, len(slots))
	if len(prompts) != len(slots) {
		for i := range errs {
			errs[i] = fmt.Errorf("prefill of %d slots with %d prompts", len(slots), len(prompts))
		}
		return logits, errs
	}
	seen := map[int]bool{}
	for i, sl := range slots {
		if seen[sl] && sl >= 0 && sl < len(b.pos) {
			errs[i] = fmt.Errorf("slot %d listed twice", sl)
		}
		seen[sl] = true
	}
	lanes := b.lanesFor(len(slots))
	if !b.ragged || lanes == 1 {
		for i, sl := range slots {
			if errs[i] == nil {
				logits[i], errs[i] = b.Prefill(sl, prompts[i])
			}
		}
		return logits, errs
	}
	// Validate here (Prefill's checks), run side by side.
	b.validPrefills(slots, prompts, errs)
	b.lane(lanes - 1) // (the lanes are made here, not by the goroutines)
	backends.Lanes(len(slots), lanes, func(lane, i int) {
		if errs[i] == nil {
			logits[i], errs[i] = b.prefillOn(lane, slots[i], prompts[i])
		}
	})
	return logits, errs
}

// validPrefills checks PrefillMany's arguments into errs (a slot listed
// twice, out of range, an empty or too long prompt; an error already there
// is kept) and zeroes the positions of the slots that pass.
func (b *Batch) validPrefills(slots []int, prompts [][]int64, errs []error) {
	if len(prompts) != len(slots) {
		for i := range errs {
			errs[i] = fmt.Errorf("prefill of %d slots with %d prompts", len(slots), len(prompts))
		}
		return
	}
	seen := map[int]bool{}
	for i, sl := range slots {
		switch {
		case errs[i] != nil:
		case seen[sl] && sl >= 0 && sl < len(b.pos):
			errs[i] = fmt.Errorf("slot %d listed twice", sl)
		case sl < 0 || sl >= len(b.pos):
			errs[i] = fmt.Errorf("slot %d of a batch of %d", sl, len(b.pos))
		case len(prompts[i]) == 0:
			errs[i] = fmt.Errorf("empty prompt")
		case len(prompts[i]) > b.s.opt.MaxLen:
			errs[i] = fmt.Errorf("%d tokens exceed the maximum length %d", len(prompts[i]), b.s.opt.MaxLen)
		default:
			b.pos[sl] = 0
		}
		seen[sl] = true
	}
}

// Step runs one decode step for each listed slot, each at its own position,
// in one call of the decode graph; logits[i] belongs to slots[i] (the
// caller's to keep).
func (b *Batch) Step(slots []int, tokens []int64) ([][]float32, error) {
	pos, uniform, err := b.stepArgs(slots, tokens)
	if err != nil {
		return nil, err
	}
	if !b.ragged {
		return b.stepLone(slots, tokens)
	}
	rows := make([][]int64, len(tokens))
	for i, t := range tokens {
		rows[i] = []int64{t}
	}
	lanes := b.lanesFor(len(slots))
	if uniform || lanes == 1 {
		lg, err := b.run(0, b.s.m.decode, "decode", rows, pos, slots, uniform)
		if err != nil {
			return nil, err
		}
		for _, sl := range slots {
			b.pos[sl]++
		}
		return ownRows(lg.Last()), nil
	}
	calls, finish := b.stepGroups(slots, rows, pos, lanes)
	b.lane(lanes - 1) // (the lanes are made here, not by the goroutines)
	backends.Lanes(len(calls), lanes, func(lane, i int) { calls[i](lane) })
	return finish()
}

// stepGroups cuts a ragged step into groups row groups: calls[g](lane)
// runs group g on lane; finish, once every call is done, returns the
// step's logits and moves its slots' positions on (or the first error).
// The groups run side by side (backends.Lanes): a row's result does not
// depend on the rows beside it (the host kernels compute every row of a
// decode call as a call of its own would).
func (b *Batch) stepGroups(slots []int, rows [][]int64, pos []int, groups int) (calls []func(lane int), finish func() ([][]float32, error)) {
	out := make([][]float32, len(slots))
	errs := make([]error, groups)
	for g := range groups {
		lo, hi := g*len(slots)/groups, (g+1)*len(slots)/groups
		calls = append(calls, func(lane int) {
			lg, err := b.run(lane, b.s.m.decode, "decode", rows[lo:hi], pos[lo:hi], slots[lo:hi], false)
			if err == nil {
				copy(out[lo:hi], ownRows(lg.Last()))
			}
			errs[g] = err
		})
	}
	return calls, func() ([][]float32, error) {
		for _, err := range errs {
			if err != nil {
				return nil, err // (the caller frees the slots of a failed step)
			}
		}
		for _, sl := range slots {
			b.pos[sl]++
		}
		return out, nil
	}
}

// stepArgs checks Step's arguments; it returns the slots' positions and
// whether the step is uniform (every slot in order, at one position).
func (b *Batch) stepArgs(slots []int, tokens []int64) (pos []int, uniform bool, err error) {
	if len(slots) == 0 || len(slots) != len(tokens) {
		return nil, false, fmt.Errorf("step of %d slots with %d tokens", len(slots), len(tokens))
	}
	seen := map[int]bool{}
	pos = make([]int, len(slots))
	uniform = len(slots) == len(b.pos)
	for i, sl := range slots {
		if sl < 0 || sl >= len(b.pos) || seen[sl] {
			return nil, false, fmt.Errorf("slot %d: out of range or listed twice", sl)
		}
		seen[sl] = true
		pos[i] = b.pos[sl]
		if pos[i] == 0 {
			return nil, false, fmt.Errorf("slot %d: decode needs a prefill first", sl)
		}
		if pos[i]+1 > b.s.opt.MaxLen {
			return nil, false, fmt.Errorf("slot %d: a token at position %d exceeds the maximum length %d", sl, pos[i], b.s.opt.MaxLen)
		}
		uniform = uniform && sl == i && pos[i] == pos[0]
	}
	return pos, uniform, nil
}

// StepPrefill is Step of slots and PrefillMany of pslots side by side, so
// that the prompts joining a running batch do not stop it: on a ragged
// batch with more than one core, one goroutine per core (each with its
// lane) takes the calls one after the other from a shared list, the
// prefills first (the longest first), then the step's row groups (one per
// core); else Step, then PrefillMany. (A prefill costs about as much as
// 15 step rows of the tiny model: a lane of its own per call, 3 goroutines
// on 2 cores, left a core idle while the third waited for a time slice.)
// A prefill slot must not be one of the step's (that prefill fails). The
// results are those of Step and PrefillMany called one after the other:
// every call reads and writes only its own slots' rows.
func (b *Batch) StepPrefill(slots []int, tokens []int64, pslots []int, prompts [][]int64) (logits, plogits [][]float32, perrs []error, err error) {
	p := runtime.GOMAXPROCS(0)
	if !b.ragged || p < 2 || len(pslots) == 0 || b.lanesFor(2) == 1 {
		logits, err = b.Step(slots, tokens)
		if len(pslots) > 0 {
			plogits, perrs = b.PrefillMany(pslots, prompts)
		}
		return logits, plogits, perrs, err
	}
	pos, _, err := b.stepArgs(slots, tokens)
	if err != nil {
		plogits, perrs = b.PrefillMany(pslots, prompts)
		return nil, plogits, perrs, err
	}
	plogits, perrs = make([][]float32, len(pslots)), make([]error, len(pslots))
	stepping := map[int]bool{}
	for _, sl := range slots {
		stepping[sl] = true
	}
	for i, sl := range pslots {
		if stepping[sl] {
			perrs[i] = fmt.Errorf("slot %d is stepped by the same call", sl)
		}
	}
	b.validPrefills(pslots, prompts, perrs)
	rows := make([][]int64, len(tokens))
	for i, t := range tokens {
		rows[i] = []int64{t}
	}
	// the calls: prefills (without an error yet), longest first, then the
	// step's row groups; each goroutine takes the next one not taken
	var calls []func(lane int)
	order := make([]int, 0, len(pslots))
	for i := range pslots {
		if perrs[i] == nil {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(i, j int) int { return len(prompts[j]) - len(prompts[i]) })
	for _, i := range order {
		calls = append(calls, func(lane int) { plogits[i], perrs[i] = b.prefillOn(lane, pslots[i], prompts[i]) })
	}
	steps, finish := b.stepGroups(slots, rows, pos, min(len(slots), p))
	calls = append(calls, steps...)
	lanes := min(p, len(calls))
	b.lane(lanes - 1) // (the lanes are made here, not by the goroutines)
	backends.Lanes(len(calls), lanes, func(lane, i int) { calls[i](lane) })
	logits, err = finish()
	return logits, plogits, perrs, err
}

// lanesFor is the number of row groups a ragged step of rows rows runs
// side by side: one per core (GOMAXPROCS), each of at least one row; one
// while the kernels are timed (OpTimes, NodeTimes are not shared).
func (b *Batch) lanesFor(rows int) int {
	if b.s.OpTimes != nil || b.s.NodeTimes != nil {
		return 1
	}
	return max(1, min(rows, runtime.GOMAXPROCS(0)))
}

// ownRows copies the rows of a call's logits: a host backend's logits may
// live in the activation arena, which the next call reuses.
func ownRows(rows [][]float32) [][]float32 {
	out := make([][]float32, len(rows))
	flat := make([]float32, 0, len(rows)*len(rows[0]))
	for i, r := range rows {
		flat = append(flat, r...)
		out[i] = flat[len(flat)-len(r):]
	}
	return out
}

// run is one call of graph r's runner for the rows tokens, row i of slot
// slots[i] at position pos[i]: uniform (the whole state, one position) or
// ragged.
func (b *Batch) run(lane int, r *backends.Runner, call string, tokens [][]int64, pos, slots []int, uniform bool) (lg *Logits, err error) {
	return b.runCall(lane, r, call, tokens, pos, slots, uniform, false, 0)
}

// runPrompt is a prefill or chunk call of slot's prompt tokens at position
// pos, tail tokens of the prompt after them: a bounded replay as
// Session.Prefill and Session.chunked make it (backends.Env.Replay: the
// nodes the plan's bounded-rows pass marked run on the last rows they
// need only, with the same last logits and caches; ~2 ms less of a
// 29-token prompt's ~10 ms on the tiny model), unless the session's
// options turn it off.
func (b *Batch) runPrompt(lane int, r *backends.Runner, call string, tokens []int64, pos, slot, tail int) (*Logits, error) {
	return b.runCall(lane, r, call, [][]int64{tokens}, []int{pos}, []int{slot}, false, b.s.bounded(), tail)
}

// runCall is run, for a call of one row (B = 1) a bounded replay when
// replay is set, ending tail rows before the prompt's end.
func (b *Batch) runCall(lane int, r *backends.Runner, call string, tokens [][]int64, pos, slots []int, uniform, replay bool, tail int) (lg *Logits, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			lg, err = nil, &InternalError{Where: "the " + call + " call", Err: fmt.Errorf("%v", rec)}
		}
	}()
	s := b.s
	B, S := len(tokens), len(tokens[0])
	ids := &backends.Tensor{DType: ir.I64, Shape: []int{B, S}}
	for i, row := range tokens {
		for t, id := range row {
			if id < 0 || int(id) >= s.m.Vocab {
				return nil, fmt.Errorf("token id %d (slot %d, position %d) out of range [0,%d)", id, slots[i], pos[i]+t, s.m.Vocab)
			}
		}
		ids.I64 = append(ids.I64, row...)
	}
	arenas, err := b.arenasFor(lane, r)
	if err != nil {
		return nil, err
	}
	if r == s.m.chunk { // a long prompt's chunk (heap.go)
		boundHeap(arenas)
	}
	c := &backends.Call{B: B, S: S, M: s.opt.MaxLen, StartPos: pos[0],
		Inputs: map[string]*backends.Tensor{"tokens": ids, "start_pos": {DType: ir.I64, Shape: []int{}, I64: []int64{int64(pos[0])}}},
		Weight: s.m.weight, Rope: s.rope, Arenas: arenas, OpTimes: s.OpTimes, NodeTimes: s.NodeTimes, Chunk: r == s.m.chunk || S > 1}
	if replay && B == 1 && !uniform {
		c.Replay, c.Tail = true, tail
	}
	var outs map[string]backends.Buffer
	switch {
	case uniform:
		c.State = s.state
		outs, err = r.Run(c)
	case B == 1: // one row (a prefill, or a step of one slot): the plain call on its rows of the state
		c.State = b.views[slots[0]]
		outs, err = r.Run(c)
	default:
		c.State = s.state
		c.RowPos = pos
		if c.RowArenas, err = b.rowArenasFor(lane, r, B); err != nil {
			return nil, err
		}
		c.RowScratch = &b.lane(lane).scratch
		for _, sl := range slots {
			c.RowState = append(c.RowState, b.views[sl])
		}
		outs, err = r.RunRows(c)
	}
	if err != nil {
		var kp *backends.KernelPanic
		if errors.As(err, &kp) {
			return nil, &InternalError{Where: "the " + call + " call", Err: err}
		}
		return nil, err
	}
	out, err := s.download(r, outs, "logits")
	if err != nil {
		return nil, fmt.Errorf("%s: reading the logits: %w", call, err)
	}
	// (a chunk before the prompt's last in a bounded replay: the head's
	// rows were left uncomputed)
	return checkLogits(out, B, S, pos[0], call, !(c.Replay && c.Tail > 0))
}

// prefillLone is Prefill on a backend without row views: a fresh session.
func (b *Batch) prefillLone(slot int, tokens []int64) ([]float32, error) {
	if old := b.lone[slot]; old != nil {
		old.Close()
		b.lone[slot] = nil
	}
	s, err := b.s.m.NewSession(Options{Batch: 1, MaxLen: b.opt.MaxLen, MaxMemory: -1, PrefillChunk: b.opt.PrefillChunk})
	if err != nil {
		return nil, err
	}
	lg, err := s.Prefill([][]int64{tokens})
	if err != nil {
		s.Close()
		return nil, err
	}
	b.lone[slot], b.pos[slot] = s, len(tokens)
	return slices.Clone(lg.Last()[0]), nil
}

// stepLone is Step on a backend without row views: each slot's session in
// turn (a failed step leaves the slots before it advanced: the caller frees
// the slots of a failed step).
func (b *Batch) stepLone(slots []int, tokens []int64) ([][]float32, error) {
	out := make([][]float32, len(slots))
	for i, sl := range slots {
		s := b.lone[sl]
		if s == nil || s.Pos != b.pos[sl] {
			return nil, fmt.Errorf("slot %d: decode needs a prefill first", sl)
		}
		lg, err := s.Decode([]int64{tokens[i]})
		if err != nil {
			return nil, err
		}
		out[i] = slices.Clone(lg.Last()[0])
		b.pos[sl]++
	}
	return out, nil
}
