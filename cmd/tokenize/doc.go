// Command tokenize encodes and decodes text with a Hugging Face
// tokenizer.json (package tokenizer), for scripts and for checking the
// tokenizer against other implementations.
//
//	tokenize -tokenizer FILE              < ["text", ...]     > [{"ids": [...], "decoded": "..."}, ...]
//	tokenize -tokenizer FILE -decode      < [[id, ...], ...]  > ["text", ...]
//	tokenize -tokenizer FILE -engram-map                      > {"count": N, "lookup": [...]}
//
// Encoding adds no special tokens (added tokens written in the text are
// matched); decoding writes special tokens as their text. -engram-map writes
// the Engram compressed token map derived from the tokenizer
// (deepseekv4.EngramTokenMap) and reads nothing from standard input.
package main
