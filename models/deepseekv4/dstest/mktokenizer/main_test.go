package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed testdata/tiny/tokenizer.json is what this program writes.
func TestTinyTokenizerIsCurrent(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Error("testdata/tiny/tokenizer.json differs from the program's output: rerun go run ./models/deepseekv4/dstest/mktokenizer > testdata/tiny/tokenizer.json")
	}
}
