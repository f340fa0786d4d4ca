package gorgonia

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// Backend runs the f32 subset of the op table that gorgonia computes with
// the same math as the CPU reference; the scheduler puts everything else on
// its fallback, the cpu backend (Capabilities).
type Backend struct{}

func init() { backends.Register(Backend{}) }

// Name implements backends.Backend.
func (Backend) Name() string { return "gorgonia" }

// Available implements backends.Backend: gorgonia is pure Go.
func (Backend) Available() error { return nil }

// Capabilities implements backends.Backend: the ops of the package
// documentation, f32 only, and the weights they read (bound as dense f32,
// so that gorgonia reads them in place); Supports refines the table.
func (b Backend) Capabilities() backends.Capabilities {
	f32 := []ir.DType{ir.F32}
	ops := map[string][]ir.DType{"weight": f32}
	for _, op := range []string{"sigmoid", "sqrt", "add_scalar", "mul_scalar", "add", "sub", "mul", "div", "matmul"} {
		ops[op] = f32
	}
	return backends.Capabilities{Ops: ops, Accept: b.Supports, Fallback: "cpu", Host: true}
}

// Open implements backends.Backend: a host device whose kernels are
// compiled gorgonia graphs.
func (b Backend) Open() (backends.Device, error) {
	return &backends.HostDevice{Backend: "gorgonia", Desc: "host, gorgonia v0.9.18 tape machine (gonum)", Kernel: b.Kernel,
		Bind: func(w *backends.HostWeight) (*backends.Tensor, error) { return backends.HostWeightTensor(w, true) }}, nil
}

// maxBcastRank is the most axes a broadcasting operand may have in
// gorgonia v0.9 (BroadcastPattern holds 4 axes per operand), counted after
// merging neighbouring axes that broadcast alike.
const maxBcastRank = 4

// Supports reports whether the backend runs node n: only f32 nodes with f32
// operands of the ops listed in the package documentation (and the weights
// they read).
func (Backend) Supports(n *ir.Node) bool {
	if n.Type.DType != ir.F32 {
		return false
	}
	for _, a := range n.Args {
		if a.Type.DType != ir.F32 {
			return false
		}
	}
	switch n.Op {
	case "weight":
		return true
	case "sigmoid", "sqrt":
		return len(n.Args) == 1
	case "add_scalar", "mul_scalar":
		_, ok := n.Attrs["value"]
		return len(n.Args) == 1 && ok
	case "add", "sub", "mul", "div":
		if len(n.Args) != 2 {
			return false
		}
		_, _, ok := staticBcast(n.Args[0].Type.Shape, n.Args[1].Type.Shape)
		return ok
	case "matmul":
		if len(n.Args) != 2 {
			return false
		}
		x, w := n.Args[0].Type.Shape, n.Args[1].Type.Shape
		if x.Rank() < 1 || w.Rank() != 2 {
			return false
		}
		kx, kw := x.Last(), w[1]
		return !kx.IsConst() || !kw.IsConst() || kx.N == kw.N
	}
	return false
}

// Kernel returns the kernel of a supported node. Each node gets its own
// cache of compiled gorgonia graphs, one per set of run-time operand shapes.
func (b Backend) Kernel(n *ir.Node) (backends.HostKernel, error) {
	if !b.Supports(n) {
		return nil, fmt.Errorf("gorgonia backend does not support %s %s", n.Op, n.Type)
	}
	if n.Op == "weight" {
		return func(env *backends.Env, n *ir.Node, _ []*backends.Tensor) (*backends.Tensor, error) {
			w, err := env.Weight(n)
			if err != nil {
				return nil, err
			}
			return backends.HostTensor(w)
		}, nil
	}
	k := &nodeKernel{op: n.Op, value: float32(n.Attrs.Float("value", 0)), plans: map[string]*plan{}}
	return k.run, nil
}

// nodeKernel runs one IR node.
type nodeKernel struct {
	op    string
	value float32 // add_scalar / mul_scalar

	mu    sync.Mutex
	plans map[string]*plan // by operand shapes
}

// plan is one compiled gorgonia graph: input nodes bound per call, an output
// node read after the tape machine ran.
type plan struct {
	mu       sync.Mutex // a tape machine runs one call at a time
	g        *G.ExprGraph
	in       []*G.Node
	inShape  [][]int // the shapes the operands are bound with (views of their data)
	out      *G.Node
	vm       G.VM
	outShape []int // the IR shape of the result
}

func (k *nodeKernel) run(_ *backends.Env, n *ir.Node, args []*backends.Tensor) (*backends.Tensor, error) {
	for i, a := range args {
		if a != nil && a.F32 == nil && len(a.U8) == 2*a.NumElements() && a.Scale == nil {
			args[i] = widenBF16(a) // a bf16 matrix bound by another backend (its first reader)
			a = args[i]
		}
		if a == nil || len(a.F32) != a.NumElements() {
			return nil, fmt.Errorf("gorgonia: operand %d is not an f32 tensor", i)
		}
	}
	p, err := k.plan(args)
	if err != nil {
		return nil, err
	}
	out := &backends.Tensor{DType: n.Type.DType, Shape: append([]int(nil), p.outShape...)}
	out.F32 = make([]float32, out.NumElements())
	if len(out.F32) == 0 {
		return out, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range args {
		v := tensor.New(tensor.WithBacking(a.F32), tensor.WithShape(p.inShape[i]...))
		if err := G.Let(p.in[i], v); err != nil {
			return nil, fmt.Errorf("gorgonia: bind operand %d: %v", i, err)
		}
	}
	defer p.vm.Reset()
	if err := p.vm.RunAll(); err != nil {
		return nil, fmt.Errorf("gorgonia: %v", err)
	}
	res, ok := p.out.Value().Data().([]float32)
	if !ok || len(res) != len(out.F32) {
		return nil, fmt.Errorf("gorgonia: result of %d elements (%T), want %d f32", len(res), p.out.Value().Data(), len(out.F32))
	}
	copy(out.F32, res)
	return out, nil
}

// plan returns the compiled graph for these operand shapes, building it on
// first use.
func (k *nodeKernel) plan(args []*backends.Tensor) (*plan, error) {
	var key strings.Builder
	for _, a := range args {
		fmt.Fprint(&key, a.Shape, ";")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.plans[key.String()]; ok {
		return p, nil
	}
	p, err := k.build(args)
	if err != nil {
		return nil, err
	}
	k.plans[key.String()] = p
	return p, nil
}

func numel(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func (k *nodeKernel) build(args []*backends.Tensor) (*plan, error) {
	p := &plan{g: G.NewGraph()}
	input := func(name string, shape ...int) *G.Node {
		nd := G.NewTensor(p.g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(name))
		p.in = append(p.in, nd)
		p.inShape = append(p.inShape, shape)
		return nd
	}
	var err error
	switch k.op {
	case "sigmoid", "sqrt", "add_scalar", "mul_scalar":
		x := args[0]
		p.outShape = x.Shape
		if numel(x.Shape) == 0 {
			return p, nil
		}
		xn := input("x", numel(x.Shape))
		switch k.op {
		case "sigmoid":
			p.out, err = G.Sigmoid(xn)
		case "sqrt":
			p.out, err = G.Sqrt(xn)
		case "add_scalar":
			p.out, err = G.Add(xn, G.NewConstant(k.value))
		case "mul_scalar":
			p.out, err = G.HadamardProd(xn, G.NewConstant(k.value))
		}
	case "add", "sub", "mul", "div":
		bp, err := runtimeBcast(args[0].Shape, args[1].Shape)
		if err != nil {
			return nil, err
		}
		p.outShape = bp.out
		if numel(bp.out) == 0 {
			return p, nil
		}
		a, b := input("a", bp.a...), input("b", bp.b...)
		if len(bp.left) == 0 && len(bp.right) == 0 {
			p.out, err = sameShape[k.op](a, b)
		} else {
			p.out, err = broadcastOp[k.op](a, b, bp.left, bp.right)
		}
		if err != nil {
			return nil, fmt.Errorf("gorgonia: %s %v %v: %v", k.op, args[0].Shape, args[1].Shape, err)
		}
	case "matmul":
		x, w := args[0], args[1]
		if len(x.Shape) < 1 || len(w.Shape) != 2 || x.Shape[len(x.Shape)-1] != w.Shape[1] {
			return nil, fmt.Errorf("gorgonia: matmul of %v by %vᵀ", x.Shape, w.Shape)
		}
		N, K := w.Shape[0], w.Shape[1]
		M := numel(x.Shape) / max(K, 1)
		p.outShape = append(append([]int(nil), x.Shape[:len(x.Shape)-1]...), N)
		if M*N == 0 {
			return p, nil
		}
		if K == 0 {
			return nil, fmt.Errorf("gorgonia: matmul with K = 0")
		}
		// y[1,M,N] = x[1,M,K] · w[1,N,K]ᵀ: gonum's Sgemm with transB, so
		// the weight is read in place, never transposed or copied.
		xn, wn := input("x", 1, M, K), input("w", 1, N, K)
		p.out, err = G.BatchedMatMul(xn, wn, false, true)
	default:
		return nil, fmt.Errorf("gorgonia: no kernel for %s", k.op)
	}
	if err != nil {
		return nil, fmt.Errorf("gorgonia: %s: %v", k.op, err)
	}
	p.vm = G.NewTapeMachine(p.g)
	return p, nil
}

var sameShape = map[string]func(a, b *G.Node) (*G.Node, error){
	"add": G.Add, "sub": G.Sub, "mul": G.HadamardProd, "div": G.HadamardDiv,
}

var broadcastOp = map[string]func(a, b *G.Node, l, r []byte) (*G.Node, error){
	"add": G.BroadcastAdd, "sub": G.BroadcastSub, "mul": G.BroadcastHadamardProd, "div": G.BroadcastHadamardDiv,
}

// bcast is how a binary op's operands are bound for gorgonia: both with the
// same rank, axes of size 1 on both sides dropped and neighbouring axes that
// broadcast alike merged; left/right list the axes along which gorgonia
// repeats the left/right operand.
type bcast struct {
	a, b, out   []int
	left, right []byte
}

// Axis classes of a broadcast: both sides equal, left operand repeated,
// right operand repeated.
const (
	clsEqual = iota
	clsLeft
	clsRight
)

// runtimeBcast plans the broadcast of concrete shapes, the way the CPU
// kernel (numpy rules) broadcasts them.
func runtimeBcast(as, bs []int) (*bcast, error) {
	r := max(len(as), len(bs))
	at := func(s []int, i int) int {
		if j := i - r + len(s); j >= 0 {
			return s[j]
		}
		return 1
	}
	bp := &bcast{}
	prev := -1
	for i := range r {
		da, db := at(as, i), at(bs, i)
		var cls, d int
		switch {
		case da == db:
			cls, d = clsEqual, da
		case da == 1:
			cls, d = clsLeft, db
		case db == 1:
			cls, d = clsRight, da
		default:
			return nil, fmt.Errorf("gorgonia: shapes %v and %v do not broadcast", as, bs)
		}
		bp.out = append(bp.out, d)
		if da == 1 && db == 1 {
			continue // nothing to broadcast, nothing to index
		}
		ea, eb := da, db
		if cls == prev {
			last := len(bp.a) - 1
			bp.a[last] *= ea
			bp.b[last] *= eb
			continue
		}
		bp.a, bp.b = append(bp.a, ea), append(bp.b, eb)
		switch cls {
		case clsLeft:
			bp.left = append(bp.left, byte(len(bp.a)-1))
		case clsRight:
			bp.right = append(bp.right, byte(len(bp.a)-1))
		}
		prev = cls
	}
	if len(bp.a) == 0 { // all sizes 1
		bp.a, bp.b = []int{1}, []int{1}
	}
	if (len(bp.left) > 0 || len(bp.right) > 0) && len(bp.a) > maxBcastRank {
		return nil, fmt.Errorf("gorgonia: broadcasting %v with %v needs %d axes (gorgonia handles %d)", as, bs, len(bp.a), maxBcastRank)
	}
	return bp, nil
}

// staticBcast checks at compile time that two IR shapes broadcast in a way
// runtimeBcast will accept for every value of their symbolic dimensions:
// each axis is equal on both sides or a constant 1 on one side, and after
// merging, a broadcast needs at most maxBcastRank axes.
func staticBcast(as, bs ir.Shape) (rank int, broadcasts bool, ok bool) {
	r := max(len(as), len(bs))
	at := func(s ir.Shape, i int) ir.Dim {
		if j := i - r + len(s); j >= 0 {
			return s[j]
		}
		return ir.C(1)
	}
	one := func(d ir.Dim) bool { return d.IsConst() && d.N == 1 }
	prev := -1
	for i := range r {
		da, db := at(as, i), at(bs, i)
		var cls int
		switch {
		case one(da) && one(db):
			continue
		case da == db:
			cls = clsEqual
		case one(da):
			cls, broadcasts = clsLeft, true
		case one(db):
			cls, broadcasts = clsRight, true
		default:
			return 0, false, false
		}
		if cls != prev {
			rank++
			prev = cls
		}
	}
	return rank, broadcasts, !broadcasts || rank <= maxBcastRank
}

// widenBF16 is t, a matrix kept as stored bf16 bytes, with F32 values.
func widenBF16(t *backends.Tensor) *backends.Tensor {
	w := &backends.Tensor{DType: t.DType, Shape: t.Shape, F32: make([]float32, t.NumElements())}
	for i := range w.F32 {
		w.F32[i] = numfmt.BF16FromBits(binary.LittleEndian.Uint16(t.U8[2*i:]))
	}
	return w
}
