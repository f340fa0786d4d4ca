package backends

import (
	"fmt"
	"reflect"

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
	// inputs are the names of the graph inputs each segment reads, and
	// values the number of values each backend's Env.Values holds at
	// least (the segments' outputs and moved inputs): found once here, not
	// on every call.
	inputs [][]string
	values map[string]int
	rp     *rowPlan // the ragged cut (rows.go), made on the first ragged call
}

// NewRunner prepares every segment of pl on the device of its backend
// (devs must hold one for every backend the placement uses).
func NewRunner(pl *Placement, devs map[string]Device) (*Runner, error) {
	r := &Runner{pl: pl, devs: devs, values: map[string]int{}}
	for _, seg := range pl.Segments {
		var names []string
		for _, n := range seg.Nodes {
			if n.Op == "input" {
				names = append(names, n.Attrs.Str("name", ""))
			}
		}
		r.inputs = append(r.inputs, names)
		r.values[seg.Backend] += len(seg.Out) + len(seg.In)
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
	// NodeTimes, when not nil, is Env.NodeTimes of every launch.
	NodeTimes map[*ir.Node]*OpTime
	// Chunk is Env.Chunk: the call's rows are positions of one prompt.
	Chunk bool
	// Replay and Tail are Env.Replay and Env.Tail.
	Replay bool
	Tail   int
	// RowPos and RowState make a ragged call (RunRows): each row's start
	// position and its state (views of its rows of the state buffers).
	RowPos   []int
	RowState []map[string]Buffer
	// RowArenas are the arenas of the per-row runs of a ragged call, by
	// row and backend, apart from Arenas (nil: fresh buffers). In its own
	// arena a row's values live from one of its runs to the next as in a
	// plain call.
	RowArenas []map[string]Arena
	// RowScratch, when not nil, keeps the buffers a ragged call stacks
	// its rows' values into for the next call (one caller's: calls side by
	// side have one each).
	RowScratch *RowScratch
}

// Run launches every segment, waits for the devices and returns the
// graph's outputs by name, each on the device that made it. A runner runs
// one call at a time.
func (r *Runner) Run(c *Call) (map[string]Buffer, error) {
	envs := map[string]*Env{}      // one per backend: its Values hold what is on its device
	moved := map[string][]Buffer{} // buffers the call uploaded, to free at the end
	for i, seg := range r.pl.Segments {
		env, err := r.env(c, seg, r.inputs[i], envs, moved)
		if err != nil {
			return nil, err
		}
		for _, a := range seg.In {
			if _, ok := env.Values[a]; ok {
				continue
			}
			if err := r.move(a, seg.Backend, envs, moved); err != nil {
				return nil, err
			}
		}
		if err := r.progs[i].Launch(env); err != nil {
			return nil, err
		}
		for _, n := range seg.Out {
			if _, ok := env.Values[n]; !ok {
				return nil, &KernelPanic{Node: fmt.Sprintf("%%%d (%s)", n.ID, n.Op), Value: fmt.Sprintf("backend %s did not return the value of segment %d's output", seg.Backend, seg.Index)}
			}
		}
	}
	for be := range envs {
		if err := r.devs[be].Sync(); err != nil {
			return nil, fmt.Errorf("backend %s: %w", be, err)
		}
	}
	out := map[string]Buffer{}
	for _, o := range r.pl.Graph.Outputs {
		out[o.Name] = envs[r.pl.Backend[o.Node]].Values[o.Node]
	}
	if err := r.free(moved, out); err != nil {
		return nil, err
	}
	return out, nil
}

// env returns the launch environment of backend seg.Backend for this call
// (made on first use), with the graph inputs seg reads (inputs) uploaded.
func (r *Runner) env(c *Call, seg *Segment, inputs []string, envs map[string]*Env, moved map[string][]Buffer) (*Env, error) {
	be := seg.Backend
	env, ok := envs[be]
	if !ok {
		env = &Env{B: c.B, S: c.S, M: c.M, StartPos: c.StartPos, State: c.State, Arena: c.Arenas[be],
			Inputs: map[string]Buffer{}, Values: make(map[*ir.Node]Buffer, r.values[be]), OpTimes: c.OpTimes, NodeTimes: c.NodeTimes, Chunk: c.Chunk, Replay: c.Replay, Tail: c.Tail}
		if c.Weight != nil {
			env.Weight = func(n *ir.Node) (Buffer, error) { return c.Weight(be, n) }
		}
		if c.Rope != nil {
			env.Rope = func(n *ir.Node) (Buffer, error) { return c.Rope(be, n) }
		}
		if c.Probe != nil {
			d := r.devs[be]
			env.Probe = func(name string, force bool, v Buffer) (Buffer, error) { return c.Probe(d, name, force, v) }
		}
		envs[be] = env
	}
	for _, name := range inputs {
		if _, ok := env.Inputs[name]; ok {
			continue
		}
		t, ok := c.Inputs[name]
		if !ok {
			return nil, fmt.Errorf("input %q not given", name)
		}
		b, err := r.devs[be].Upload(t)
		if err != nil {
			return nil, fmt.Errorf("backend %s: uploading input %q: %w", be, name, err)
		}
		env.Inputs[name] = b
		moved[be] = append(moved[be], b)
	}
	return env, nil
}

// move brings the value of node a from its backend's device to backend
// to's (a hand-over between host devices: Download and Upload return the
// tensor itself).
func (r *Runner) move(a *ir.Node, to string, envs map[string]*Env, moved map[string][]Buffer) error {
	from := r.pl.Backend[a]
	src, dst := r.devs[from], r.devs[to]
	t, err := src.Download(envs[from].Values[a])
	if err != nil {
		return fmt.Errorf("backend %s: reading %%%d (%s) for %s: %w", from, a.ID, a.Op, to, err)
	}
	out, err := dst.Upload(t)
	if err != nil {
		return fmt.Errorf("backend %s: receiving %%%d (%s) from %s: %w", to, a.ID, a.Op, from, err)
	}
	envs[to].Values[a] = out
	moved[to] = append(moved[to], out)
	return nil
}

// free releases the buffers the call uploaded (inputs, moved values),
// except one that a backend handed on as a graph output (a view of an
// input): the caller still reads it.
func (r *Runner) free(moved map[string][]Buffer, outputs map[string]Buffer) error {
	for be, bs := range moved {
		for _, b := range bs {
			if isOneOf(b, outputs) {
				continue
			}
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

// isOneOf reports whether b is one of the buffers in m (buffers of a
// type that cannot be compared are never equal).
func isOneOf(b Buffer, m map[string]Buffer) bool {
	if b == nil || !reflect.TypeOf(b).Comparable() {
		return false
	}
	for _, o := range m {
		if o != nil && reflect.TypeOf(o) == reflect.TypeOf(b) && o == b {
			return true
		}
	}
	return false
}
