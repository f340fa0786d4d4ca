package cli

import (
	"flag"
	"fmt"
	"math"
	"sort"
)

// Flag checks shared by the commands: a value out of its range, or a flag
// given without the one it only makes sense with, is one line naming the
// flag (exit 2) rather than a setting silently ignored.

// Visited returns the flags set on the command line (fs.Visit), so that a
// flag given at its default value still counts as given.
func Visited(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// Needs refuses each of flags that is set while on is not:
// "-json only makes sense with -bench".
func Needs(set map[string]bool, on string, flags ...string) error {
	if set[on] {
		return nil
	}
	if given := sorted(set, flags); len(given) > 0 {
		return fmt.Errorf("-%s only makes sense with -%s", given[0], on)
	}
	return nil
}

// Excludes refuses each of flags that is set while on is set, with the
// reason: "-prompt-ids has no effect with -bench (it times random prompts)".
func Excludes(set map[string]bool, on, why string, flags ...string) error {
	if !set[on] {
		return nil
	}
	if given := sorted(set, flags); len(given) > 0 {
		return fmt.Errorf("-%s has no effect with -%s (%s)", given[0], on, why)
	}
	return nil
}

// sorted returns the set ones of flags, in name order (a stable message).
func sorted(set map[string]bool, flags []string) []string {
	var out []string
	for _, f := range flags {
		if set[f] {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// IntRange refuses an integer flag outside [lo, hi]; why says where hi
// comes from (e.g. "far above any memory; keeps sums from overflowing").
func IntRange(name string, v, lo, hi int64, why string) error {
	switch {
	case v < lo:
		return fmt.Errorf("-%s %d: must be ≥ %d", name, v, lo)
	case v > hi:
		return fmt.Errorf("-%s %d: must be ≤ %d (%s)", name, v, hi, why)
	}
	return nil
}

// Finite refuses a NaN or infinite float flag.
func Finite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("-%s %v: must be a finite number", name, v)
	}
	return nil
}
