package main

import (
	"flag"
	"strings"
	"testing"
)

// The synopsis of -h names every flag.
func TestUsageNamesEveryFlag(t *testing.T) {
	var o options
	newFlags(&o).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(usage, "-"+f.Name+" ") && !strings.Contains(usage, "-"+f.Name+"]") {
			t.Errorf("usage does not name -%s", f.Name)
		}
	})
}

// Flags out of range are refused before anything is opened.
func TestFlagRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-plan is required"},
		{[]string{"-plan", "x", "-max-batch", "0"}, "-max-batch"},
		{[]string{"-plan", "x", "-max-queue", "-1"}, "-max-queue"},
		{[]string{"-plan", "x", "-max-tokens", "-1"}, "-max-tokens"},
		{[]string{"-plan", "x", "-request-timeout", "-1s"}, "-request-timeout"},
		{[]string{"-plan", "x", "-max-memory", "0"}, "max-memory"},
		{[]string{"-plan", "/nonexistent/plan"}, "/nonexistent/plan"},
		{[]string{"-plan", "x", "stray"}, "unexpected argument"},
	} {
		err := run(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %q: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
