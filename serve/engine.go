package serve

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
