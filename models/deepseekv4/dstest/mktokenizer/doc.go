// Command mktokenizer writes the tiny checkpoint's tokenizer.json: a
// byte-level BPE in Hugging Face's format with the structure of DeepSeek's
// own (the same pre-tokenizer, post-processor and decoder), sized to the
// tiny config's vocab_size. Its merges are learned from corpus.txt.
//
// Rerun from the repository root (the output is deterministic):
//
//	go run ./models/deepseekv4/dstest/mktokenizer > testdata/tiny/tokenizer.json
//
// Layout, like DeepSeek's: ids 0-2 are BOS, EOS and pad (in the vocabulary
// and added tokens), ids 3-258 the 256 byte tokens in the byte-level
// alphabet's order, then the learned merges, and the chat tokens take the
// last ids as added tokens.
package main
