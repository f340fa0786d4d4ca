package serve

import "sync"

// outbox carries a request's events from the scheduler to its handler.
// The scheduler never waits on it (a slow client cannot stall a step) and
// it holds no more than the text not yet written: consecutive pieces of
// the same kind are joined.
type outbox struct {
	mu     sync.Mutex
	evs    []event
	notify chan struct{} // has a value when evs may be non-empty
}

func newOutbox() *outbox { return &outbox{notify: make(chan struct{}, 1)} }

// push adds ev (the scheduler's side).
func (o *outbox) push(ev event) {
	o.mu.Lock()
	if n := len(o.evs); n > 0 && joinable(o.evs[n-1], ev) {
		o.evs[n-1].content += ev.content
		o.evs[n-1].reasoning += ev.reasoning
	} else {
		o.evs = append(o.evs, ev)
	}
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// joinable: two text pieces of one kind, the first not the last event.
func joinable(a, b event) bool {
	if a.finish != "" || a.err != nil || b.finish != "" || b.err != nil {
		return false
	}
	return (a.reasoning == "" && b.reasoning == "") || (a.content == "" && b.content == "")
}

// take returns the events pushed since the last take (the handler's side,
// after a receive from notify).
func (o *outbox) take() []event {
	o.mu.Lock()
	defer o.mu.Unlock()
	evs := o.evs
	o.evs = nil
	return evs
}
