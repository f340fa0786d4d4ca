// Package deepseekv4 reads and validates DeepSeek V4.1 configurations (the
// flat inference config and Hugging Face config.json), derives the layer
// layout (sliding-window, full, reuse and re-indexing layers), computes the
// Engram and RoPE constants, builds the prefill, decode and chunk graphs of
// the text path as primitive IR ops, and accounts for every parameter.
//
//	c, err := deepseekv4.LoadConfig("config.json")
//	m, err := deepseekv4.BuildModule(c)    // graphs "prefill", "decode" and "chunk"
//	acc := deepseekv4.Account(c, m.Graph("prefill"))
//	fmt.Print(acc.Format())
package deepseekv4
