package main

import (
	"fmt"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/plan"
)

// listBackends prints every registered backend: available ones with their
// device (Describe) and what they run, the others with the reason.
func listBackends(set map[string]bool) error {
	for name := range set {
		if name != "list-backends" {
			return fmt.Errorf("-%s has no effect with -list-backends", name)
		}
	}
	for _, name := range backends.Names() {
		b, err := backends.Get(name)
		if err != nil {
			return err
		}
		if err := b.Available(); err != nil {
			fmt.Printf("%s: unavailable: %v\n", name, err)
			continue
		}
		desc := "(could not open: %v)"
		if d, err := b.Open(); err != nil {
			desc = fmt.Sprintf(desc, err)
		} else {
			desc = d.Describe()
			d.Close()
		}
		fmt.Printf("%s: available: %s; %s\n", name, desc, runs(b.Capabilities()))
	}
	return nil
}

// runs says what a capability table covers.
func runs(c backends.Capabilities) string {
	what := "every op"
	if len(c.Ops) < len(ir.Ops) || c.Accept != nil {
		what = fmt.Sprintf("%d of %d ops", len(c.Ops), len(ir.Ops))
	}
	if c.Fallback != "" {
		what += ", the rest on " + c.Fallback
	}
	return what
}

// printPlacement prints where each op of the plan's graphs runs on
// backend be, with the bytes crossing per call at batch 1 and maximum
// length maxLen (4096 when 0): the prefill of maxLen tokens and a decode
// step.
func printPlacement(p *plan.Plan, be string, maxLen int) error {
	M := int64(maxLen)
	if M == 0 {
		M = 4096
	}
	for _, g := range p.Module.Graphs {
		pl, err := backends.Schedule(g, be)
		if err != nil {
			return err
		}
		b := ir.Bindings{B: 1, S: M, M: M}
		if g.Name == "decode" {
			b = ir.Bindings{B: 1, S: 1, M: M, P: M - 1}
		}
		fmt.Print(pl.Report(b))
	}
	return nil
}
