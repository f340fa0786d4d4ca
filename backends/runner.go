package backends

import (
	"fmt"

	"github.com/ds4go/ds4/ir"
)

// Runner runs a placed graph on opened devices: it launches the segments
// in order, moves the values that cross a boundary (a hand-over between
// host devices, Download + Upload otherwise) and waits for the devices at
// the end of the call. The engine and the conformance suite both use it.
type Runner struct {
	pl    *Placement
	devs  map[string]Device // by backend name
	progs []Program         // one per segment
}

// NewRunner prepares every segment of pl on the device of its backend
// (devs must hold one for every backend the placement uses).
func NewRunner(pl *Placement, devs map[string]Device) (*Runner, error) {
	r := &Runner{pl: pl, devs: devs}
	for _, seg := range pl.Segments {
		d, ok := devs[seg.Backend]
		if !ok {
			return nil, fmt.Errorf("segment %d: no device opened for backend %s", seg.Index, seg.Backend)
		}
		p, err := d.Prepare(seg)
		if err != nil {
			return nil, fmt.Errorf("backend %s: preparing segment %d (%d nodes from %%%d %s): %w", seg.Backend, seg.Index, len(seg.Nodes), seg.Nodes[0].ID, seg.Nodes[0].Op, err)
		}
		r.progs = append(r.progs, p)
	}
	return r, nil
}

// Placement is the placement the runner runs.
func (r *Runner) Placement() *Placement { return r.pl }

// Call is one call of a graph: the sizes, and the buffers by device.
type Call struct {
	B, S, M, StartPos int
	// Inputs are the graph's inputs in host memory; each is uploaded to
	// the device of the segments that read it.
	Inputs map[string]*Tensor
	// Weight returns the bound weight of node n on the named backend's
	// device.
	Weight func(backend string, n *ir.Node) (Buffer, error)
	// State holds each state by name, on the device of its state node.
	State map[string]Buffer
	// Rope returns the RoPE table of node n on the named backend's device.
	Rope func(backend string, n *ir.Node) (Buffer, error)
	// Arenas holds the call's activation arena on each backend's device.
	Arenas map[string]Arena
	// Probe, when not nil, sees every probe value (Env.Probe), with the
	// device holding it (to Download it, or Upload a replacement).
	Probe   func(d Device, name string, force bool, v Buffer) (Buffer, error)
	OpTimes map[string]*OpTime
}

// Run launches every segment, waits for the devices and returns the
// graph's outputs by name, each on the device that made it.
func (r *Runner) Run(c *Call) (map[string]Buffer, error) {
	vals := map[*ir.Node]Buffer{}             // the boundary values, on their own device
	moved := map[string]map[*ir.Node]Buffer{} // values already moved to a backend this call
	used := map[string]bool{}
	inputs := map[string]map[string]Buffer{}
	for i, seg := range r.pl.Segments {
		d := r.devs[seg.Backend]
		used[seg.Backend] = true
		env, err := r.env(c, d, seg, inputs)
		if err != nil {
			return nil, err
		}
		for _, a := range seg.In {
			v, err := r.move(a, vals[a], seg.Backend, moved)
			if err != nil {
				return nil, err
			}
			env.Values[a] = v
		}
		if err := r.progs[i].Launch(env); err != nil {
			return nil, err
		}
		for _, n := range seg.Out {
			v, ok := env.Values[n]
			if !ok {
				return nil, &KernelPanic{Node: fmt.Sprintf("%%%d (%s)", n.ID, n.Op), Value: fmt.Sprintf("backend %s did not return the value of segment %d's output", seg.Backend, seg.Index)}
			}
			vals[n] = v
		}
	}
	for be := range used {
		if err := r.devs[be].Sync(); err != nil {
			return nil, fmt.Errorf("backend %s: %w", be, err)
		}
	}
	if err := r.free(inputs, moved); err != nil {
		return nil, err
	}
	out := map[string]Buffer{}
	for _, o := range r.pl.Graph.Outputs {
		out[o.Name] = vals[o.Node]
	}
	return out, nil
}

// env builds the launch environment of one segment on device d.
func (r *Runner) env(c *Call, d Device, seg *Segment, inputs map[string]map[string]Buffer) (*Env, error) {
	be := seg.Backend
	env := &Env{B: c.B, S: c.S, M: c.M, StartPos: c.StartPos, State: c.State, Arena: c.Arenas[be],
		Values: map[*ir.Node]Buffer{}, OpTimes: c.OpTimes}
	if inputs[be] == nil {
		inputs[be] = map[string]Buffer{}
	}
	for _, n := range seg.Nodes {
		if n.Op != "input" {
			continue
		}
		name := n.Attrs.Str("name", "")
		if _, ok := inputs[be][name]; ok {
			continue
		}
		t, ok := c.Inputs[name]
		if !ok {
			return nil, fmt.Errorf("input %q not given", name)
		}
		b, err := d.Upload(t)
		if err != nil {
			return nil, fmt.Errorf("backend %s: uploading input %q: %w", be, name, err)
		}
		inputs[be][name] = b
	}
	env.Inputs = inputs[be]
	if c.Weight != nil {
		env.Weight = func(n *ir.Node) (Buffer, error) { return c.Weight(be, n) }
	}
	if c.Rope != nil {
		env.Rope = func(n *ir.Node) (Buffer, error) { return c.Rope(be, n) }
	}
	if c.Probe != nil {
		env.Probe = func(name string, force bool, v Buffer) (Buffer, error) { return c.Probe(d, name, force, v) }
	}
	return env, nil
}

// move brings value v of node a to backend to's device.
func (r *Runner) move(a *ir.Node, v Buffer, to string, moved map[string]map[*ir.Node]Buffer) (Buffer, error) {
	from := r.pl.Backend[a]
	if from == to {
		return v, nil
	}
	if m, ok := moved[to][a]; ok {
		return m, nil
	}
	src, dst := r.devs[from], r.devs[to]
	t, err := src.Download(v)
	if err != nil {
		return nil, fmt.Errorf("backend %s: reading %%%d (%s) for %s: %w", from, a.ID, a.Op, to, err)
	}
	out, err := dst.Upload(t)
	if err != nil {
		return nil, fmt.Errorf("backend %s: receiving %%%d (%s) from %s: %w", to, a.ID, a.Op, from, err)
	}
	if moved[to] == nil {
		moved[to] = map[*ir.Node]Buffer{}
	}
	moved[to][a] = out
	return out, nil
}

// free releases the buffers the call uploaded (inputs, moved values).
func (r *Runner) free(inputs map[string]map[string]Buffer, moved map[string]map[*ir.Node]Buffer) error {
	for be, m := range inputs {
		for _, b := range m {
			if err := r.devs[be].Free(b); err != nil {
				return fmt.Errorf("backend %s: %w", be, err)
			}
		}
	}
	for be, m := range moved {
		for _, b := range m {
			if err := r.devs[be].Free(b); err != nil {
				return fmt.Errorf("backend %s: %w", be, err)
			}
		}
	}
	return nil
}

// RunNode runs node n alone on device d (a one-node segment whose
// arguments are uploaded from args) and returns its value in host memory:
// for tests and the conformance suite. env gives the sizes and callbacks
// (nil: none); its Values are replaced.
func RunNode(d Device, n *ir.Node, env *Env, args ...*Tensor) (*Tensor, error) {
	if len(args) != len(n.Args) {
		return nil, fmt.Errorf("%s: %d arguments for %d operands", n.Op, len(args), len(n.Args))
	}
	seg := &Segment{Nodes: []*ir.Node{n}, In: n.Args, Out: []*ir.Node{n}}
	p, err := d.Prepare(seg)
	if err != nil {
		return nil, err
	}
	if env == nil {
		env = &Env{}
	}
	env.Values = map[*ir.Node]Buffer{}
	for i, a := range n.Args {
		b, err := d.Upload(args[i])
		if err != nil {
			return nil, err
		}
		env.Values[a] = b
	}
	if err := p.Launch(env); err != nil {
		return nil, err
	}
	if err := d.Sync(); err != nil {
		return nil, err
	}
	return d.Download(env.Values[n])
}
