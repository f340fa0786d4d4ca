package serve

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// fakeEngine is an Engine whose logits are a function of each slot's
// tokens (so an answer depends on its own sequence only, as with the real
// model), recording the calls the scheduler makes.
type fakeEngine struct {
	mu       sync.Mutex
	slots    int
	ragged   bool
	vocab    int
	hist     [][]int64 // tokens each slot holds
	prompt   []int     // prompt length of each slot
	script   []int64   // when set: the i-th generated token of every sequence (then end of sentence)
	gate     chan struct{}
	delay    time.Duration // each Step sleeps this long
	empty    bool          // Step returns rows of no logits
	failOn   int64         // a fed token that makes its step fail
	panicOn  int64         // a fed token that makes its step panic
	steps    [][]int
	stepPos  [][]int
	frees    []int
	prefills int
}

func newFake(slots int) *fakeEngine {
	return &fakeEngine{slots: slots, ragged: true, vocab: 512, hist: make([][]int64, slots), prompt: make([]int, slots), failOn: -1, panicOn: -1}
}

func (f *fakeEngine) Slots() int   { return f.slots }
func (f *fakeEngine) Ragged() bool { return f.ragged }

func (f *fakeEngine) Pos(slot int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hist[slot])
}

func (f *fakeEngine) Free(slot int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frees = append(f.frees, slot)
	f.hist[slot] = nil
}

// next is the token the logits of slot make most likely.
func (f *fakeEngine) next(slot int) int64 {
	h := f.hist[slot]
	if f.script != nil {
		i := len(h) - f.prompt[slot]
		if i < len(f.script) {
			return f.script[i]
		}
		return 1 // end of sentence
	}
	var x uint64 = 1469598103934665603
	for _, t := range h {
		x = (x ^ uint64(t)) * 1099511628211
	}
	return int64(67 + x%26) // a..z: never a special token
}

func (f *fakeEngine) logits(slot int) []float32 {
	l := make([]float32, f.vocab)
	for i := range l {
		l[i] = float32(i%7) * 0.01
	}
	l[f.next(slot)] = 10
	return l
}

func (f *fakeEngine) Prefill(slot int, tokens []int64) ([]float32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slot < 0 || slot >= f.slots {
		return nil, fmt.Errorf("prefill of slot %d", slot)
	}
	f.prefills++
	f.hist[slot] = append([]int64(nil), tokens...)
	f.prompt[slot] = len(tokens)
	return f.logits(slot), nil
}

func (f *fakeEngine) Step(slots []int, tokens []int64) ([][]float32, error) {
	if f.gate != nil {
		<-f.gate
	}
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	var pos []int
	for _, s := range slots {
		pos = append(pos, len(f.hist[s]))
	}
	f.steps = append(f.steps, append([]int(nil), slots...))
	f.stepPos = append(f.stepPos, pos)
	for i, s := range slots {
		if len(f.hist[s]) == 0 {
			return nil, fmt.Errorf("step of empty slot %d", s)
		}
		if !f.ragged && pos[i] != pos[0] {
			return nil, fmt.Errorf("step of slots at positions %v on a non-ragged engine", pos)
		}
		if tokens[i] == f.failOn {
			return nil, fmt.Errorf("kernel failure (injected)")
		}
		if tokens[i] == f.panicOn {
			panic("kernel panic (injected)")
		}
	}
	out := make([][]float32, len(slots))
	for i, s := range slots {
		f.hist[s] = append(f.hist[s], tokens[i])
		out[i] = f.logits(s)
		if f.empty {
			out[i] = nil
		}
	}
	return out, nil
}

// manyFake is a fakeEngine that prefills several slots in one call
// (PrefillMany, as engine.Batch), recording the slots of each call; a
// prompt whose tokens after the first are fail fails its own prefill only
// (in either call).
type manyFake struct {
	*fakeEngine
	fail  []int64
	calls [][]int
}

func (m *manyFake) PrefillMany(slots []int, prompts [][]int64) ([][]float32, []error) {
	m.mu.Lock()
	m.calls = append(m.calls, append([]int(nil), slots...))
	m.mu.Unlock()
	logits, errs := make([][]float32, len(slots)), make([]error, len(slots))
	for i, sl := range slots {
		logits[i], errs[i] = m.Prefill(sl, prompts[i])
	}
	return logits, errs
}

func (m *manyFake) Prefill(slot int, tokens []int64) ([]float32, error) {
	if len(tokens) > 0 && slices.Equal(tokens[1:], m.fail) {
		return nil, fmt.Errorf("prefill failure (injected)")
	}
	return m.fakeEngine.Prefill(slot, tokens)
}

// stepFake is a manyFake that also runs a step and prefills in one call
// (StepPrefill, as engine.Batch: Step, then PrefillMany), recording the
// step's slots, the prefills' and their prompts' lengths of each call.
type stepFake struct {
	*manyFake
	joint [][3][]int
}

func (m *stepFake) StepPrefill(slots []int, tokens []int64, pslots []int, prompts [][]int64) ([][]float32, [][]float32, []error, error) {
	lens := make([]int, len(prompts))
	for i, p := range prompts {
		lens[i] = len(p)
	}
	m.mu.Lock()
	m.joint = append(m.joint, [3][]int{append([]int(nil), slots...), append([]int(nil), pslots...), lens})
	m.mu.Unlock()
	logits, err := m.Step(slots, tokens)
	plogits, perrs := m.PrefillMany(pslots, prompts)
	return logits, plogits, perrs, err
}
