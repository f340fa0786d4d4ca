package backends

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ds4go/ds4/ir"
)

// Placement says which backend runs each op of a graph.
type OldPlacement struct {
	Primary  string
	Fallback string
	// ByBackend counts the nodes of each op placed on each backend.
	ByBackend map[string]map[string]int
}

// FallbackOps lists the ops (with counts) that run on the fallback backend.
func (p *OldPlacement) FallbackOps() string {
	m := p.ByBackend[p.Fallback]
	if p.Fallback == p.Primary || len(m) == 0 {
		return ""
	}
	var ops []string
	for op, n := range m {
		ops = append(ops, fmt.Sprintf("%s×%d", op, n))
	}
	sort.Strings(ops)
	return strings.Join(ops, ", ")
}

// Schedule lowers a graph onto a primary backend, placing every node the
// primary does not support on the fallback (normally the CPU backend, which
// supports every op). The result runs the nodes in graph order.
func ScheduleOld(g *ir.Graph, primary, fallback OldBackend) (OldProgram, *OldPlacement, error) {
	pl := &OldPlacement{Primary: primary.Name(), Fallback: primary.Name(), ByBackend: map[string]map[string]int{}}
	if fallback != nil {
		pl.Fallback = fallback.Name()
	}
	prog := newScheduled(g)
	for i, n := range g.Nodes {
		var be OldBackend = primary
		if !primary.Supports(n) {
			if fallback == nil || !fallback.Supports(n) {
				return nil, nil, fmt.Errorf("backend %s: %%%d (%s): no kernel and no fallback", primary.Name(), n.ID, n.Op)
			}
			be = fallback
		}
		k, err := be.Kernel(n)
		if err != nil {
			return nil, nil, fmt.Errorf("backend %s: %%%d (%s): %v", be.Name(), n.ID, n.Op, err)
		}
		prog.kernels[i] = k
		if pl.ByBackend[be.Name()] == nil {
			pl.ByBackend[be.Name()] = map[string]int{}
		}
		pl.ByBackend[be.Name()][n.Op]++
	}
	return prog, pl, nil
}

// scheduled runs a graph's nodes in order. What the run loop needs of the
// graph's structure (argument positions, use counts, outputs) is derived
// once here, not on every call.
type scheduled struct {
	g       *ir.Graph
	kernels []KernelFunc
	args    [][]int // positions of each node's arguments
	uses    []int   // readers of each node's value (outputs count as one)
	outputs []int   // positions of the graph outputs
}

func newScheduled(g *ir.Graph) *scheduled {
	p := &scheduled{g: g, kernels: make([]KernelFunc, len(g.Nodes)), args: make([][]int, len(g.Nodes)), uses: make([]int, len(g.Nodes))}
	index := make(map[*ir.Node]int, len(g.Nodes))
	for i, n := range g.Nodes {
		index[n] = i
		for _, a := range n.Args {
			p.args[i] = append(p.args[i], index[a])
			p.uses[index[a]]++
		}
	}
	for _, o := range g.Outputs {
		p.outputs = append(p.outputs, index[o.Node])
		p.uses[index[o.Node]]++
	}
	return p
}

// Run executes the nodes in order, dropping each value after its last use.
// A panic inside a kernel is returned as a KernelPanic naming the node.
func (p *scheduled) Run(env *OldEnv) (err error) {
	uses := append([]int(nil), p.uses...)
	vals := make([]*Tensor, len(p.g.Nodes))
	var cur *ir.Node
	defer func() {
		if e := recover(); e != nil {
			err = &KernelPanic{Node: fmt.Sprintf("%%%d (%s)", cur.ID, cur.Op), Value: e}
		}
	}()
	args := make([]*Tensor, 0, 8)
	for i, n := range p.g.Nodes {
		cur = n
		args = args[:0]
		for _, j := range p.args[i] {
			args = append(args, vals[j])
		}
		var t0 time.Time
		if env.OpTimes != nil {
			t0 = time.Now()
		}
		v, err := p.kernels[i](env, n, args)
		if env.OpTimes != nil {
			ot := env.OpTimes[n.Op]
			if ot == nil {
				ot = &OpTime{}
				env.OpTimes[n.Op] = ot
			}
			ot.Calls++
			ot.Nanos += time.Since(t0).Nanoseconds()
		}
		if err != nil {
			return fmt.Errorf("%%%d (%s): %w", n.ID, n.Op, err)
		}
		vals[i] = v
		for _, j := range p.args[i] {
			if uses[j]--; uses[j] == 0 {
				vals[j] = nil
			}
		}
	}
	env.Outputs = map[string]*Tensor{}
	for k, o := range p.g.Outputs {
		env.Outputs[o.Name] = vals[p.outputs[k]]
	}
	return nil
}
