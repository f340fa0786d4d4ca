// Package tokenizer loads a Hugging Face tokenizer.json as DeepSeek ships it
// (byte-level BPE with a Sequence of Split pre-tokenizers) and encodes and
// decodes text with it, in pure Go.
package tokenizer
