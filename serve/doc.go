// Package serve is an OpenAI-compatible HTTP server on the engine:
// /v1/models, /v1/completions and /v1/chat/completions (JSON and
// Server-Sent Events), /health and /metrics (Prometheus).
//
// One scheduler goroutine owns the engine's batch (Engine): requests wait
// in a bounded queue (full: 429) and join between decode steps: while
// sequences run, up to one queued prompt per core is prefilled beside the next
// step (an engine with StepPrefill, on more than one core); otherwise one
// prefill, and more while the prefills take less than the last step (the
// running streams wait at most about one step more). Every step decodes
// all active sequences at once (continuous batching; an engine that is not
// Ragged gets the largest group at one position, no group starving); a
// sequence leaves
// when it finishes, is cancelled (client gone) or times out, and its slot
// is freed before the next step. A failed or panicking engine call fails
// only its own requests (500); the server goes on.
//
// Text is decoded incrementally (tokenizer.StreamDecoder: whole UTF-8
// characters only, the text that may begin a stop string held back). In
// thinking mode the text before </think> is reasoning_content; the
// request's stop strings apply to the answer after it.
package serve
