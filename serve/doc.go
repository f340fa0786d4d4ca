// Package serve is an OpenAI-compatible HTTP server on the engine:
// /v1/models, /v1/completions and /v1/chat/completions (JSON and
// Server-Sent Events), /health and /metrics (Prometheus).
//
// One scheduler goroutine owns the engine's batch (Engine): requests wait
// in a bounded queue (full: 429), join between decode steps (one prefill
// per step at most) and leave when they finish, are cancelled or time out;
// every step decodes all active sequences at once (continuous batching).
// A failed or panicking step fails only its own requests (500).
package serve
