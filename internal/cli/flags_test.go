package cli

import (
	"flag"
	"math"
	"testing"
)

func TestFlagChecks(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("bench", false, "")
	fs.Bool("json", false, "")
	fs.Int("n", 1, "")
	if err := fs.Parse([]string{"-json", "-n", "1"}); err != nil {
		t.Fatal(err)
	}
	set := Visited(fs)
	if !set["json"] || !set["n"] || set["bench"] {
		t.Fatalf("Visited = %v (a flag given at its default counts as given)", set)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Needs(set, "bench", "n", "json"), "-json only makes sense with -bench"},
		{Needs(map[string]bool{"bench": true, "json": true}, "bench", "json"), ""},
		{Excludes(map[string]bool{"bench": true, "n": true}, "bench", "why", "n"), "-n has no effect with -bench (why)"},
		{Excludes(set, "bench", "why", "n"), ""},
		{IntRange("n", -5, 1, 10, "ten"), "-n -5: must be ≥ 1"},
		{IntRange("n", 11, 1, 10, "ten"), "-n 11: must be ≤ 10 (ten)"},
		{IntRange("n", 10, 1, 10, "ten"), ""},
		{Finite("t", math.Inf(1)), "-t +Inf: must be a finite number"},
		{Finite("t", math.NaN()), "-t NaN: must be a finite number"},
		{Finite("t", 1e300), ""},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
