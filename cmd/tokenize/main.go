package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/tokenizer"
)

// maxInput bounds standard input.
const maxInput = 256 << 20

func main() { cli.Main("tokenize", run) }

func run(args []string) error {
	fs := cli.NewFlagSet("tokenize", "tokenize -tokenizer FILE [-decode | -engram-map] < input.json")
	path := fs.String("tokenizer", "", "Hugging Face tokenizer.json (required)")
	decode := fs.Bool("decode", false, "read a JSON array of id arrays and write their texts")
	engram := fs.Bool("engram-map", false, "write the Engram compressed token map derived from the tokenizer")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("-tokenizer is required")
	}
	if err := cli.Excludes(cli.Visited(fs), "engram-map", "it reads no input", "decode"); err != nil {
		return err
	}
	tok, err := tokenizer.Load(*path)
	if err != nil {
		return err
	}
	var out any
	switch {
	case *engram:
		lookup, count := deepseekv4.EngramTokenMap(tok)
		out = struct {
			Count  int     `json:"count"`
			Lookup []int64 `json:"lookup"`
		}{count, lookup}
	case *decode:
		if out, err = decodeAll(tok); err != nil {
			return err
		}
	default:
		if out, err = encodeAll(tok); err != nil {
			return err
		}
	}
	return write(out)
}

type encoded struct {
	IDs     []int64 `json:"ids"`
	Decoded string  `json:"decoded"`
}

func encodeAll(tok *tokenizer.Tokenizer) ([]encoded, error) {
	data, err := readInput()
	if err != nil {
		return nil, err
	}
	var texts []string
	if err := json.Unmarshal(data, &texts); err != nil || texts == nil {
		return nil, fmt.Errorf("standard input: not a JSON array of strings%s", why(err))
	}
	out := make([]encoded, len(texts))
	for i, s := range texts {
		ids := tok.Encode(s)
		if ids == nil {
			ids = []int64{}
		}
		out[i] = encoded{IDs: ids, Decoded: tok.Decode(ids)}
	}
	return out, nil
}

func decodeAll(tok *tokenizer.Tokenizer) ([]string, error) {
	data, err := readInput()
	if err != nil {
		return nil, err
	}
	var seqs [][]int64
	if err := json.Unmarshal(data, &seqs); err != nil || seqs == nil {
		return nil, fmt.Errorf("standard input: not a JSON array of arrays of integer ids%s", why(err))
	}
	out := make([]string, len(seqs))
	for i, ids := range seqs {
		for j, id := range ids {
			if _, ok := tok.TokenString(id); !ok {
				return nil, fmt.Errorf("standard input: array %d, id %d (index %d): no such token (the vocabulary has ids 0..%d)", i, id, j, tok.VocabSize()-1)
			}
		}
		out[i] = tok.Decode(ids)
	}
	return out, nil
}

func why(err error) string {
	if err == nil {
		return " (got null)"
	}
	return ": " + err.Error()
}

// readInput reads standard input, at most maxInput bytes of UTF-8.
func readInput() ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(os.Stdin, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("standard input: %v", err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("standard input: larger than %d MiB, the limit", maxInput>>20)
	}
	if off := fileio.InvalidUTF8(data); off >= 0 {
		return nil, fmt.Errorf("standard input: invalid UTF-8 at byte offset %d", off)
	}
	return data, nil
}

// write writes v as JSON on standard output, in one piece, without HTML
// escapes (texts hold "<" and ">" as written).
func write(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return &cli.Internal{Err: err}
	}
	w := bufio.NewWriter(os.Stdout)
	w.Write(buf.Bytes())
	if err := w.Flush(); err != nil {
		return fmt.Errorf("standard output: %v", err)
	}
	return nil
}
