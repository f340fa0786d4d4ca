package serve

import (
	"fmt"

	"github.com/ds4go/ds4/engine"
)

// Engine is the batch the scheduler drives: Slots rows that advance
// independently (engine.Batch has this method set). Only the scheduler's
// goroutine calls it.
type Engine interface {
	// Slots is the number of rows.
	Slots() int
	// Prefill resets slot and runs tokens at positions 0..len-1; it returns
	// the logits of the last position.
	Prefill(slot int, tokens []int64) ([]float32, error)
	// Step runs one decode step for each listed slot at its own position;
	// logits[i] belongs to slots[i].
	Step(slots []int, tokens []int64) ([][]float32, error)
	// Pos is the number of tokens slot holds.
	Pos(slot int) int
	// Free marks slot reusable.
	Free(slot int)
	// Ragged reports whether Step takes slots at different positions in
	// one call; when false the scheduler steps slots of one position.
	Ragged() bool
}

// Sessions is an Engine of one engine.Session per slot, each of batch 1:
// the fallback when the runtime has no batch (each Step runs its slots one
// after the other, so nothing is shared between them but the weights).
type Sessions struct {
	model *engine.Model
	opt   engine.Options
	slots []*engine.Session
}

// NewSessions returns an Engine of n slots of maximum length maxLen.
func NewSessions(m *engine.Model, n, maxLen int, maxMemory int64) (*Sessions, error) {
	if n <= 0 || maxLen <= 0 {
		return nil, fmt.Errorf("serve: %d slots of length %d: both must be positive", n, maxLen)
	}
	s := &Sessions{model: m, opt: engine.Options{Batch: 1, MaxLen: maxLen, MaxMemory: maxMemory}, slots: make([]*engine.Session, n)}
	// One session up front checks that a slot fits in memory at all.
	sess, err := m.NewSession(s.opt)
	if err != nil {
		return nil, err
	}
	sess.Close()
	return s, nil
}

// Slots is the number of slots.
func (s *Sessions) Slots() int { return len(s.slots) }

// Ragged is true: each slot is its own session.
func (s *Sessions) Ragged() bool { return true }

// Pos is the number of tokens of slot.
func (s *Sessions) Pos(slot int) int {
	if slot < 0 || slot >= len(s.slots) || s.slots[slot] == nil {
		return 0
	}
	return s.slots[slot].Pos
}

// Free closes slot's session.
func (s *Sessions) Free(slot int) {
	if slot >= 0 && slot < len(s.slots) && s.slots[slot] != nil {
		s.slots[slot].Close()
		s.slots[slot] = nil
	}
}

// Prefill opens a fresh session for slot and runs tokens.
func (s *Sessions) Prefill(slot int, tokens []int64) ([]float32, error) {
	if slot < 0 || slot >= len(s.slots) {
		return nil, fmt.Errorf("prefill: slot %d of %d", slot, len(s.slots))
	}
	s.Free(slot)
	o := s.opt
	o.PrefillLen = len(tokens)
	sess, err := s.model.NewSession(o)
	if err != nil {
		return nil, err
	}
	lg, err := sess.Prefill([][]int64{tokens})
	if err != nil {
		sess.Close()
		return nil, err
	}
	s.slots[slot] = sess
	return lg.Last()[0], nil
}

// Step decodes one token for each listed slot, one session at a time.
func (s *Sessions) Step(slots []int, tokens []int64) ([][]float32, error) {
	if len(slots) != len(tokens) {
		return nil, fmt.Errorf("step: %d slots, %d tokens", len(slots), len(tokens))
	}
	out := make([][]float32, len(slots))
	for i, slot := range slots {
		if slot < 0 || slot >= len(s.slots) || s.slots[slot] == nil {
			return nil, fmt.Errorf("step: slot %d holds no sequence", slot)
		}
		lg, err := s.slots[slot].Decode([]int64{tokens[i]})
		if err != nil {
			return nil, err
		}
		out[i] = lg.Last()[0]
	}
	return out, nil
}

// Close frees every slot.
func (s *Sessions) Close() error {
	for i := range s.slots {
		s.Free(i)
	}
	return nil
}

// *engine.Batch is an Engine.
var _ Engine = (*engine.Batch)(nil)
