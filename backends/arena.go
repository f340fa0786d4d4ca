package backends

// Arena holds the activation buffers of one graph for one session: slot k
// is reused by every value the plan assigned to k (attribute buf), across
// calls, so steady-state decoding allocates almost nothing. A nil arena, or
// slot -1, allocates fresh memory. An arena is not safe for concurrent runs.
type Arena struct {
	slots []arenaSlot
}

type arenaSlot struct {
	f32 []float32
	i64 []int64
	i32 []int32
}

func (a *Arena) slot(k int) *arenaSlot {
	if a == nil || k < 0 {
		return nil
	}
	for len(a.slots) <= k {
		a.slots = append(a.slots, arenaSlot{})
	}
	return &a.slots[k]
}

// F32 returns n zeroed float32s from slot k.
func (a *Arena) F32(k, n int) []float32 {
	s := a.slot(k)
	if s == nil {
		return make([]float32, n)
	}
	if cap(s.f32) < n {
		s.f32 = make([]float32, n)
	}
	out := s.f32[:n]
	clear(out)
	return out
}

// I64 returns n zeroed int64s from slot k.
func (a *Arena) I64(k, n int) []int64 {
	s := a.slot(k)
	if s == nil {
		return make([]int64, n)
	}
	if cap(s.i64) < n {
		s.i64 = make([]int64, n)
	}
	out := s.i64[:n]
	clear(out)
	return out
}

// I32 returns n zeroed int32s from slot k.
func (a *Arena) I32(k, n int) []int32 {
	s := a.slot(k)
	if s == nil {
		return make([]int32, n)
	}
	if cap(s.i32) < n {
		s.i32 = make([]int32, n)
	}
	out := s.i32[:n]
	clear(out)
	return out
}

// Bytes is the memory the arena holds now.
func (a *Arena) Bytes() int64 {
	if a == nil {
		return 0
	}
	var n int64
	for _, s := range a.slots {
		n += int64(cap(s.f32))*4 + int64(cap(s.i64))*8 + int64(cap(s.i32))*4
	}
	return n
}
