package main

import "github.com/ds4go/ds4/ir"

// optimise runs the pass pipeline (none yet) and returns the pass names run.
func optimise(o options, m *ir.Module) ([]string, error) {
	return nil, nil
}
