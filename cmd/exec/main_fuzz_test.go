package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/cli"
)

// FuzzParsePrompt checks that ParsePrompt never panics and that what it
// accepts is a non-empty rectangle of ids with one-line errors otherwise.
func FuzzParsePrompt(f *testing.F) {
	for _, s := range []string{"1,2,3;4,5,6", "7", " 1 , 2 ; 3 , 4 ", "1,,2", ";", "", "1;2,3", "9223372036854775807", "-1", "1e3", "0x10", "1;\n2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ParsePrompt(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(rows) == 0 || len(rows[0]) == 0 {
			t.Fatalf("accepted %q as an empty prompt", s)
		}
		for i, r := range rows {
			if len(r) != len(rows[0]) {
				t.Fatalf("row %d has %d ids, row 0 has %d", i, len(r), len(rows[0]))
			}
		}
	})
}

// An engine's recovered panic leaves exec as an internal error (exit 1);
// everything else stays bad input (exit 2).
func TestAsInternal(t *testing.T) {
	ie := &engine.InternalError{Where: "the prefill call", Err: errors.New("boom")}
	var ci *cli.Internal
	if err := asInternal(fmt.Errorf("wrapped: %w", ie)); !errors.As(err, &ci) {
		t.Errorf("asInternal(InternalError) = %T", err)
	}
	if err := asInternal(errors.New("bad input")); errors.As(err, &ci) {
		t.Errorf("asInternal(plain error) is internal")
	}
	if asInternal(nil) != nil {
		t.Errorf("asInternal(nil) != nil")
	}
	if code := cli.Run("exec", func([]string) error { return asInternal(ie) }, nil); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
}
