package serve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"time"

	"github.com/ds4go/ds4/tokenizer"
)

// event is what the scheduler sends a request: a piece of text and, on the
// last one, the finish reason (or the error that ended it).
type event struct {
	reasoning, content string
	finish             string // "stop" or "length" on the last event
	err                *apiError
	promptTokens       int
	completionTokens   int
}

// seq is a request in the scheduler: its job and its decoding state.
type seq struct {
	*job
	ctx   context.Context
	out   *outbox
	rng   *rand.Rand
	queue time.Time // when it entered the queue

	slot      int
	next      int64 // the last sample, to feed at the next step
	generated int
	dec       *tokenizer.StreamDecoder
	reasoning bool // inside the thinking (before </think>)
	last      time.Time
	waited    int // steps passed over (positions not ragged)
}

// newSeq makes the scheduler's state of j.
func newSeq(ctx context.Context, j *job) *seq {
	seed := j.seed
	if !j.seeded {
		seed = rand.Uint64()
	}
	return &seq{job: j, ctx: ctx, out: newOutbox(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), slot: -1}
}

// finish sends the last event of q.
func (q *seq) finish(ev event) {
	ev.promptTokens, ev.completionTokens = len(q.prompt), q.generated
	q.out.push(ev)
}

// scheduler owns the engine: it admits queued requests into free slots,
// steps the active ones and retires those done.
type scheduler struct {
	s      *Server
	eng    Engine
	queue  chan *seq
	active []*seq // by slot; nil: free
	rr     int    // round-robin start among same-size position groups
	// lastStep is the duration of the last decode step: the time the
	// prefills between two steps may take.
	lastStep time.Duration
	done     chan struct{}
}

// submit queues q, or refuses at once when the queue is full.
// The queue depth gauge goes up before the send and down at each receive
// (a Set of len(queue) from both sides could land out of order and stay
// stale while the scheduler waits).
func (sc *scheduler) submit(q *seq) bool {
	sc.s.metrics.queueDepth.Inc()
	select {
	case sc.queue <- q:
		return true
	default:
		sc.s.metrics.queueDepth.Dec()
		return false
	}
}

// run is the scheduler's loop; it returns when stop is closed and nothing
// is active.
func (sc *scheduler) run(stop <-chan struct{}) {
	defer close(sc.done)
	for {
		sc.retire()
		var first *seq
		if sc.count() == 0 {
			select {
			case first = <-sc.queue:
				sc.s.metrics.queueDepth.Dec()
			case <-stop:
				sc.drainQueue()
				return
			}
		}
		if first == nil && sc.stepAdmitting() {
			continue
		}
		sc.admitMore(first)
		sc.step()
	}
}

// stepPrefiller is an Engine that runs a step and prefills of other slots
// side by side (engine.Batch.StepPrefill); the results are those of Step
// and PrefillMany called one after the other.
type stepPrefiller interface {
	StepPrefill(slots []int, tokens []int64, pslots []int, prompts [][]int64) (logits, plogits [][]float32, perrs []error, err error)
}

// stepAdmitting runs the next step with prefills of queued requests beside
// it, on an engine that can (stepPrefiller, more than one core, a step to
// run, a free slot and a request waiting): requests join until their
// prompt tokens reach the budget (Config.PrefillTokens), their prefills
// run side by side with the step's row groups, one per core. A burst of
// requests thus joins in one step rather than one per core in each of many
// steps (the batch runs full sooner, and its sequences end together
// instead of leaving a tail of small steps). It reports whether it ran
// the step.
func (sc *scheduler) stepAdmitting() bool {
	sp, ok := sc.eng.(stepPrefiller)
	if !ok || runtime.GOMAXPROCS(0) < 2 || !sc.eng.Ragged() || sc.count() == 0 {
		return false
	}
	qs := sc.takeBudget(nil)
	if len(qs) == 0 {
		return false
	}
	slots := sc.pick()
	tokens := make([]int64, len(slots))
	for i, slot := range slots {
		tokens[i] = sc.active[slot].next
	}
	taken := map[int]bool{}
	pslots := make([]int, len(qs))
	prompts := make([][]int64, len(qs))
	for i, q := range qs {
		q.slot = -1
		for j, a := range sc.active {
			if a == nil && !taken[j] {
				q.slot = j
				break
			}
		}
		taken[q.slot] = true
		pslots[i], prompts[i] = q.slot, q.prompt
	}
	t0 := time.Now()
	var plogits [][]float32
	var perrs []error
	logits, err := guard(func() ([][]float32, error) {
		lg, plg, pes, err := sp.StepPrefill(slots, tokens, pslots, prompts)
		plogits, perrs = plg, pes
		return lg, err
	})
	if err == nil && len(logits) != len(slots) {
		err = fmt.Errorf("step returned %d rows of logits for %d slots", len(logits), len(slots))
	}
	if len(plogits) != len(qs) || len(perrs) != len(qs) {
		e := err
		if e == nil {
			e = fmt.Errorf("prefill of %d slots returned %d logits and %d errors", len(qs), len(plogits), len(perrs))
		}
		plogits, perrs = make([][]float32, len(qs)), make([]error, len(qs))
		for i := range perrs {
			perrs[i] = e
		}
	}
	sc.lastStep = time.Since(t0)
	sc.stepDone(slots, logits, err)
	sc.admitted(qs, plogits, perrs)
	return true
}

// admitMore admits queued requests (first, when not nil, taken from the
// queue already) into free slots between two steps: one round, and more
// while the prefills so far took less than the last step (so the running
// streams wait at most about one step more, and a burst of requests fills
// the batch in a few steps rather than one per step). A round is one
// request, or on an engine that prefills several slots side by side
// (PrefillMany) requests up to the prompt token budget (takeBudget).
func (sc *scheduler) admitMore(first *seq) {
	t0 := time.Now()
	_, many := sc.eng.(manyPrefiller)
	for sc.free() >= 0 {
		var qs []*seq
		if many {
			qs, first = sc.takeBudget(first), nil
		} else if first != nil {
			qs, first = []*seq{first}, nil
		} else {
			select {
			case q := <-sc.queue:
				sc.s.metrics.queueDepth.Dec()
				qs = []*seq{q}
			default:
			}
		}
		if len(qs) == 0 {
			return
		}
		sc.admit(qs...)
		if time.Since(t0) >= sc.lastStep {
			return
		}
	}
}

// takeBudget takes queued requests (after first, when not nil) for free
// slots until their prompt tokens reach the budget (Config.PrefillTokens;
// the last one taken may pass it); a request whose context has ended is
// answered and not counted.
func (sc *scheduler) takeBudget(first *seq) []*seq {
	var qs []*seq
	tokens := 0
	if first != nil {
		qs, tokens = append(qs, first), len(first.prompt)
	}
	for len(qs) < sc.freeCount() && tokens < sc.s.cfg.PrefillTokens {
		select {
		case q := <-sc.queue:
			sc.s.metrics.queueDepth.Dec()
			if q.ctx.Err() != nil {
				q.finish(event{err: ctxError(q.ctx)})
				continue
			}
			qs, tokens = append(qs, q), tokens+len(q.prompt)
		default:
			return qs
		}
	}
	return qs
}

// manyPrefiller is an Engine that prefills several slots side by side
// (engine.Batch); logits[i] and errs[i] belong to slots[i].
type manyPrefiller interface {
	PrefillMany(slots []int, prompts [][]int64) (logits [][]float32, errs []error)
}

// drainQueue refuses whatever is still queued at the end.
func (sc *scheduler) drainQueue() {
	for {
		select {
		case q := <-sc.queue:
			sc.s.metrics.queueDepth.Dec()
			q.finish(event{err: unavailable()})
		default:
			return
		}
	}
}

func unavailable() *apiError {
	return &apiError{Status: 503, Message: "the server is shutting down", Type: typeUnavailable}
}

func (sc *scheduler) count() int {
	n := 0
	for _, q := range sc.active {
		if q != nil {
			n++
		}
	}
	return n
}

func (sc *scheduler) free() int {
	for i, q := range sc.active {
		if q == nil {
			return i
		}
	}
	return -1
}

// freeCount is the number of free slots.
func (sc *scheduler) freeCount() int { return len(sc.active) - sc.count() }

// retire frees the slots of cancelled requests (client gone, timeout,
// forced shutdown).
func (sc *scheduler) retire() {
	for slot, q := range sc.active {
		if q != nil && q.ctx.Err() != nil {
			q.finish(event{err: ctxError(q.ctx)})
			sc.release(slot)
		}
	}
}

// release frees slot.
func (sc *scheduler) release(slot int) {
	sc.active[slot] = nil
	sc.eng.Free(slot)
	sc.s.metrics.active.Set(float64(sc.count()))
}

// ctxError is the refusal of a request whose context ended.
func ctxError(ctx context.Context) *apiError {
	if errors.Is(context.Cause(ctx), errKilled) {
		return &apiError{Status: 503, Message: "the server shut down before the answer was complete", Type: typeUnavailable}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &apiError{Status: 504, Message: "the request timed out", Type: typeTimeout}
	}
	return &apiError{Status: 499, Message: "the request was cancelled", Type: typeInvalid}
}

// admit prefills each of qs into a free slot (at most as many as there
// are free slots; side by side on a manyPrefiller) and sends each its
// first token.
func (sc *scheduler) admit(qs ...*seq) {
	var run []*seq
	var slots []int
	taken := map[int]bool{}
	for _, q := range qs {
		if q.ctx.Err() != nil {
			q.finish(event{err: ctxError(q.ctx)})
			continue
		}
		q.slot = -1
		for i, a := range sc.active {
			if a == nil && !taken[i] {
				q.slot = i
				break
			}
		}
		taken[q.slot] = true
		run, slots = append(run, q), append(slots, q.slot)
	}
	if len(run) == 0 {
		return
	}
	logits, errs := sc.prefill(slots, run)
	sc.admitted(run, logits, errs)
}

// admitted takes the prefills of run (logits[i] and errs[i] of run[i], in
// slot run[i].slot) into the batch and sends each its first token; a failed
// one frees its slot and ends its request.
func (sc *scheduler) admitted(run []*seq, logits [][]float32, errs []error) {
	for i, q := range run {
		slot, err := q.slot, errs[i]
		if err != nil {
			sc.eng.Free(slot)
			sc.s.metrics.stepFailures.Inc()
			sc.s.logf("prefill of slot %d failed: %v", slot, err)
			q.finish(event{err: engineError(err)})
			continue
		}
		sc.active[slot] = q
		sc.s.metrics.active.Set(float64(sc.count()))
		q.dec = sc.s.tok.NewStreamDecoder(q.stopsNow(sc.s))
		q.reasoning = q.chat && q.thinking
		now := time.Now()
		sc.s.metrics.ttft.Observe(now.Sub(q.queue).Seconds())
		q.last = now
		sc.safeSample(q, logits[i])
	}
}

// prefill runs the prefills of qs into slots: side by side on a
// manyPrefiller, else one after the other; a panic fails every prefill of
// the call.
func (sc *scheduler) prefill(slots []int, qs []*seq) ([][]float32, []error) {
	prompts := make([][]int64, len(qs))
	for i, q := range qs {
		prompts[i] = q.prompt
	}
	if mp, ok := sc.eng.(manyPrefiller); ok && len(qs) > 1 {
		var errs []error
		logits, err := guard(func() ([][]float32, error) {
			lg, es := mp.PrefillMany(slots, prompts)
			errs = es
			return lg, nil
		})
		if err != nil || len(logits) != len(qs) || len(errs) != len(qs) {
			if err == nil {
				err = fmt.Errorf("prefill of %d slots returned %d logits and %d errors", len(qs), len(logits), len(errs))
			}
			errs = make([]error, len(qs))
			for i := range errs {
				errs[i] = err
			}
		}
		return logits, errs
	}
	logits, errs := make([][]float32, len(qs)), make([]error, len(qs))
	for i := range qs {
		var lg [][]float32
		lg, errs[i] = guard(func() ([][]float32, error) {
			lg, err := sc.eng.Prefill(slots[i], prompts[i])
			return [][]float32{lg}, err
		})
		if errs[i] == nil {
			logits[i] = lg[0]
		}
	}
	return logits, errs
}

// safeSample is sample with a panic (sampling, decoding: a bug, or logits
// the sampler cannot take) failing q alone.
func (sc *scheduler) safeSample(q *seq, logits []float32) {
	defer func() {
		if r := recover(); r != nil {
			sc.s.logf("sampling slot %d panicked: %v", q.slot, r)
			q.finish(event{err: engineError(fmt.Errorf("panic: %v", r))})
			if sc.active[q.slot] == q {
				sc.release(q.slot)
			}
		}
	}()
	sc.sample(q, logits)
}

// engineError is the 500 of a failed engine call.
func engineError(err error) *apiError {
	return &apiError{Status: 500, Message: "the engine failed on this request: " + err.Error(), Type: typeServer}
}

// guard runs f, turning a panic into an error.
func guard(f func() ([][]float32, error)) (out [][]float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// stopsNow are the stop strings of q's current phase: inside the thinking
// only its end (and the chat stops); after it, the request's and the chat
// stops.
func (q *seq) stopsNow(s *Server) []string {
	if q.chat && q.thinking && !q.reasoningDone() {
		return append([]string{s.thinkEnd}, s.chatStops...)
	}
	stops := append([]string(nil), q.stops...)
	if q.chat {
		stops = append(stops, s.chatStops...)
	}
	return stops
}

func (q *seq) reasoningDone() bool { return q.dec != nil && !q.reasoning }

// sample draws q's next token from logits, decodes it and sends the text;
// it retires q when the answer is complete.
func (sc *scheduler) sample(q *seq, logits []float32) {
	s := sc.s
	id := q.sampling.Sample([][]float32{logits}, q.rng)[0]
	q.generated++
	s.metrics.completionTokens.Inc()
	if id == s.eos {
		sc.end(q, q.flush(), "stop")
		return
	}
	text, stopped := q.dec.Add(id)
	ev := q.event(text)
	if stopped && q.reasoning {
		// </think>: the answer begins, with a decoder of the answer's stops.
		q.reasoning = false
		q.dec = s.tok.NewStreamDecoder(q.stopsNow(s))
		stopped = false
	}
	switch {
	case stopped:
		sc.end(q, ev, "stop")
	case q.generated >= q.maxNew:
		tail := q.flush()
		ev.reasoning += tail.reasoning
		ev.content += tail.content
		sc.end(q, ev, "length")
	default:
		if ev.reasoning != "" || ev.content != "" {
			q.out.push(ev)
		}
		q.next = id
	}
}

// event is text of q's current phase.
func (q *seq) event(text string) event {
	if q.reasoning {
		return event{reasoning: text}
	}
	return event{content: text}
}

// flush is the text q's decoder still holds.
func (q *seq) flush() event { return q.event(q.dec.Flush()) }

// end sends q's last event and frees its slot.
func (sc *scheduler) end(q *seq, ev event, reason string) {
	ev.finish = reason
	q.finish(ev)
	sc.release(q.slot)
}

// step decodes one token for the active slots: all of them when the
// engine is ragged, else the largest group at one position (a group passed
// over for len(groups) steps goes first, so none starves).
func (sc *scheduler) step() {
	slots := sc.pick()
	if len(slots) == 0 {
		return
	}
	tokens := make([]int64, len(slots))
	for i, slot := range slots {
		tokens[i] = sc.active[slot].next
	}
	t0 := time.Now()
	logits, err := guard(func() ([][]float32, error) { return sc.eng.Step(slots, tokens) })
	if err == nil && len(logits) != len(slots) {
		err = fmt.Errorf("step returned %d rows of logits for %d slots", len(logits), len(slots))
	}
	sc.lastStep = time.Since(t0)
	sc.stepDone(slots, logits, err)
}

// stepDone records a step of slots that took sc.lastStep and samples each
// slot's next token from its logits (or fails them all on err).
func (sc *scheduler) stepDone(slots []int, logits [][]float32, err error) {
	sc.s.metrics.stepSeconds.Observe(sc.lastStep.Seconds())
	sc.s.metrics.stepRows.Observe(float64(len(slots)))
	if err != nil {
		sc.s.metrics.stepFailures.Inc()
		sc.s.logf("decode step of slots %v failed: %v", slots, err)
		for _, slot := range slots {
			q := sc.active[slot]
			q.finish(event{err: engineError(err)})
			sc.release(slot)
		}
		return
	}
	now := time.Now()
	for i, slot := range slots {
		q := sc.active[slot]
		sc.s.metrics.itl.Observe(now.Sub(q.last).Seconds())
		q.last = now
		sc.safeSample(q, logits[i])
	}
}

// pick chooses the slots of the next step.
func (sc *scheduler) pick() []int {
	var all []int
	for slot, q := range sc.active {
		if q != nil {
			all = append(all, slot)
		}
	}
	if len(all) == 0 || sc.eng.Ragged() {
		return all
	}
	groups := map[int][]int{}
	for _, slot := range all {
		p := sc.eng.Pos(slot)
		groups[p] = append(groups[p], slot)
	}
	pos := make([]int, 0, len(groups))
	for p := range groups {
		pos = append(pos, p)
	}
	sort.Ints(pos)
	best := -1
	starved := func(p int) bool { return sc.active[groups[p][0]].waited >= len(groups) }
	for k := range pos {
		p := pos[(sc.rr+k)%len(pos)]
		switch {
		case best < 0:
			best = p
		case starved(p) && !starved(best):
			best = p
		case starved(p) == starved(best) && len(groups[p]) > len(groups[best]):
			best = p
		}
	}
	sc.rr++
	for _, p := range pos {
		for _, slot := range groups[p] {
			if p == best {
				sc.active[slot].waited = 0
			} else {
				sc.active[slot].waited++
			}
		}
	}
	return groups[best]
}

// doneClosed reports whether the scheduler has stopped.
func (sc *scheduler) doneClosed() bool {
	select {
	case <-sc.done:
		return true
	default:
		return false
	}
}
