package backends

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
)

// HostKernel computes one node of a host backend from its argument values.
type HostKernel func(env *Env, n *ir.Node, args []*Tensor) (*Tensor, error)

// HostDevice is the Device of a backend whose buffers are *Tensor in host
// memory: Upload keeps the tensor it is given and Download returns the
// tensor itself (no copy), Alloc makes zeroed slices, arenas are
// HostArenas, Sync has nothing to wait for (a launch runs the segment's
// kernels one after the other before it returns). The backend supplies its
// kernels and its weight layout.
type HostDevice struct {
	Backend string // the backend's name, for errors
	Desc    string // Describe's answer
	// Kernel returns the kernel of a node of a segment (called by Prepare,
	// once per node).
	Kernel func(n *ir.Node) (HostKernel, error)
	// Bind lays out a weight (nil: HostWeightTensor(w, false)).
	Bind func(w *HostWeight) (*Tensor, error)
}

// Describe implements Device.
func (d *HostDevice) Describe() string { return d.Desc }

// Memory implements Device: MemAvailable and MemTotal of /proc/meminfo.
func (d *HostDevice) Memory() (free, total int64, err error) { return HostMemory() }

// BindWeight implements Device.
func (d *HostDevice) BindWeight(w *HostWeight) (Buffer, error) {
	if d.Bind != nil {
		return d.Bind(w)
	}
	return HostWeightTensor(w, false)
}

// Alloc implements Device: floats in F32, i64 in I64, i32 in I32, the
// byte-sized dtypes in U8.
func (d *HostDevice) Alloc(dt ir.DType, shape []int) (Buffer, error) {
	return ZeroTensor(dt, shape), nil
}

// Upload implements Device: the tensor itself.
func (d *HostDevice) Upload(t *Tensor) (Buffer, error) { return t, nil }

// Download implements Device: the tensor itself.
func (d *HostDevice) Download(b Buffer) (*Tensor, error) { return HostTensor(b) }

// Free implements Device: the garbage collector frees host tensors.
func (d *HostDevice) Free(Buffer) error { return nil }

// NewArena implements Device.
func (d *HostDevice) NewArena(sizes []SlotSize) (Arena, error) { return NewHostArena(sizes), nil }

// Sync implements Device: launches have finished when they return.
func (d *HostDevice) Sync() error { return nil }

// Close implements Device.
func (d *HostDevice) Close() error { return nil }

// HostTensor is b as a host tensor (an error for another device's buffer).
func HostTensor(b Buffer) (*Tensor, error) {
	t, ok := b.(*Tensor)
	if !ok {
		return nil, fmt.Errorf("a %T buffer on a host backend", b)
	}
	return t, nil
}

// Prepare implements Device: the segment's kernels, run in order.
func (d *HostDevice) Prepare(seg *Segment) (Program, error) {
	p := &hostProgram{seg: seg, kernels: make([]HostKernel, len(seg.Nodes)), args: make([][]int, len(seg.Nodes)), uses: make([]int, len(seg.Nodes)), replay: make([]replayNode, len(seg.Nodes))}
	index := make(map[*ir.Node]int, len(seg.Nodes))
	for i, n := range seg.Nodes {
		k, err := d.Kernel(n)
		if err != nil {
			return nil, fmt.Errorf("%%%d (%s): %v", n.ID, n.Op, err)
		}
		p.kernels[i] = k
		p.replay[i] = replayOf(n)
		index[n] = i
		for _, a := range n.Args {
			j, ok := index[a]
			if !ok {
				j = -1 // from another segment: env.Values
			} else {
				p.uses[j]++
			}
			p.args[i] = append(p.args[i], j)
		}
	}
	for _, o := range seg.Out {
		p.outputs = append(p.outputs, index[o])
		p.uses[index[o]]++
	}
	return p, nil
}

// hostProgram runs a segment's nodes in order. What the loop needs of the
// segment's structure is derived once, not on every call.
type hostProgram struct {
	seg     *Segment
	kernels []HostKernel
	args    [][]int // positions of each node's arguments in the segment (-1: env.Values)
	uses    []int   // readers of each node's value in the segment (outputs count as one)
	outputs []int   // positions of seg.Out
	replay  []replayNode
}

// Launch implements Program: it runs every kernel before it returns,
// dropping each value after its last use. A panic inside a kernel is
// returned as a KernelPanic naming the node.
func (p *hostProgram) Launch(env *Env) (err error) {
	uses := append([]int(nil), p.uses...)
	vals := make([]*Tensor, len(p.seg.Nodes))
	var cur *ir.Node
	defer func() {
		if e := recover(); e != nil {
			err = &KernelPanic{Node: fmt.Sprintf("%%%d (%s)", cur.ID, cur.Op), Value: e}
		}
	}()
	args := make([]*Tensor, 0, 8)
	for i, n := range p.seg.Nodes {
		cur = n
		args = args[:0]
		for k, j := range p.args[i] {
			if j >= 0 {
				args = append(args, vals[j])
				continue
			}
			t, err := HostTensor(env.Values[n.Args[k]])
			if err != nil {
				return fmt.Errorf("%%%d (%s): argument %d: %v", n.ID, n.Op, k, err)
			}
			args = append(args, t)
		}
		var t0 time.Time
		if env.OpTimes != nil || env.NodeTimes != nil {
			t0 = time.Now()
		}
		var v *Tensor
		if local := p.replay[i].replayRows(env); local < env.S {
			v, err = p.replay[i].launchRows(p.kernels[i], env, n, args, local)
		} else {
			v, err = p.kernels[i](env, n, args)
		}
		if env.OpTimes != nil || env.NodeTimes != nil {
			d := time.Since(t0).Nanoseconds()
			if env.OpTimes != nil {
				env.OpTimes[n.Op] = env.OpTimes[n.Op].add(d)
			}
			if env.NodeTimes != nil {
				env.NodeTimes[n] = env.NodeTimes[n].add(d)
			}
		}
		if err != nil {
			return fmt.Errorf("%%%d (%s): %w", n.ID, n.Op, err)
		}
		vals[i] = v
		for _, j := range p.args[i] {
			if j < 0 {
				continue
			}
			if uses[j]--; uses[j] == 0 {
				vals[j] = nil
			}
		}
	}
	for k, o := range p.seg.Out {
		env.Values[o] = vals[p.outputs[k]]
	}
	return nil
}

// HostWeightTensor lays out a checkpoint tensor for the host kernels:
//   - a 2-D BF16 matrix keeps its mapped bytes in U8 (the CPU kernels
//     widen on the fly, bit-identically to converting first, and widen the
//     whole matrix where an op needs F32); dense adds an F32 copy;
//   - other float tensors become F32 (rounded to bf16 when declared bf16);
//   - fp8 and fp4 keep codes in U8 and e8m0 scales in Scale; an fp8 weight
//     declared bf16 (attn.wo_a, used as bf16(e4m3·e8m0)) stays as stored,
//     dequantised by its consumer (unless dense, which widens it);
//     fp8row becomes bf16-rounded F32;
//   - i64 becomes I64.
//
// dense asks for F32 values of every float weight that is not fp8/fp4
// typed (for backends whose kernels read F32 only: gorgonia).
func HostWeightTensor(w *HostWeight, dense bool) (*Tensor, error) {
	if len(w.Parts) > 0 {
		stack := &Tensor{DType: w.DType, Shape: w.Shape}
		for _, p := range w.Parts {
			t, err := HostWeightTensor(p, dense)
			if err != nil {
				return nil, err
			}
			stack.Parts = append(stack.Parts, t)
		}
		return stack, nil
	}
	st := &safetensors.Tensor{Name: w.Name, DType: w.Stored, Shape: w.Shape, Data: w.Data}
	switch w.Format {
	case "i64":
		v, err := st.Int64s()
		if err != nil {
			return nil, err
		}
		return &Tensor{DType: ir.I64, Shape: w.Shape, I64: v}, nil
	case "bf16", "f32":
		if w.Stored == "BF16" && len(w.Shape) == 2 && len(w.Data) == 2*w.Shape[0]*w.Shape[1] {
			out := &Tensor{DType: w.DType, Shape: w.Shape, U8: w.Data}
			if dense {
				out.F32 = make([]float32, len(w.Data)/2)
				for i := range out.F32 {
					out.F32[i] = math.Float32frombits(uint32(w.Data[2*i])<<16 | uint32(w.Data[2*i+1])<<24)
				}
			}
			return out, nil
		}
		v, err := st.Float32s()
		if err != nil {
			return nil, err
		}
		if w.DType == ir.BF16 {
			numfmt.BF16RoundSlice(v)
		}
		return &Tensor{DType: w.DType, Shape: w.Shape, F32: v}, nil
	case "fp8", "fp8row":
		if w.DType == ir.F8E4M3 || (w.Format == "fp8" && !dense) {
			return &Tensor{DType: w.DType, Shape: w.Shape, U8: w.Data, Scale: w.Scale}, nil
		}
		rows, cols := w.Shape[0], w.Shape[1]
		kb := (cols + 31) / 32
		v := make([]float32, rows*cols)
		for o := range rows {
			srow := o * kb // fp8row: one scale row per weight row
			if w.Format == "fp8" {
				srow = (o / 32) * kb
			}
			for i := range cols {
				s := numfmt.E8M0ToF32(w.Scale[srow+i/32])
				v[o*cols+i] = numfmt.BF16Round(numfmt.E4M3ToF32(w.Data[o*cols+i]) * s)
			}
		}
		return &Tensor{DType: w.DType, Shape: w.Shape, F32: v}, nil
	case "fp4":
		return &Tensor{DType: w.DType, Shape: w.Shape, U8: w.Data, Scale: w.Scale}, nil
	}
	return nil, fmt.Errorf("weight %q: unknown format %q", w.Name, w.Format)
}

// HostMemory returns MemAvailable and MemTotal of /proc/meminfo in bytes.
func HostMemory() (free, total int64, err error) {
	m, err := ProcKiB("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	free, ok := m["MemAvailable"]
	if !ok {
		return 0, 0, fmt.Errorf("/proc/meminfo: no MemAvailable")
	}
	total, ok = m["MemTotal"]
	if !ok {
		total = -1
	}
	return free, max(total, free), nil
}

// ProcKiB reads a /proc file of "Key:  N kB" lines (meminfo, a process's
// status or smaps_rollup) and returns each key's N in bytes; lines whose
// first field is not a number are left out.
func ProcKiB(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		m[k] = ir.SatMul(kb, 1024)
	}
	return m, nil
}

// RowView implements RowDevice: row row of t's leading axis, sharing t's
// slices (capped, so that an append cannot reach the next row).
func (d *HostDevice) RowView(b Buffer, row int) (Buffer, error) {
	t, err := HostTensor(b)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) == 0 || row < 0 || row >= t.Shape[0] {
		return nil, fmt.Errorf("row %d of a tensor of shape %v", row, t.Shape)
	}
	if t.Scale != nil || t.Parts != nil {
		return nil, fmt.Errorf("row view of a quantised or stacked tensor")
	}
	n := t.NumElements() / t.Shape[0]
	lo, hi := row*n, (row+1)*n
	v := &Tensor{DType: t.DType, Shape: append([]int{1}, t.Shape[1:]...)}
	if t.F32 != nil {
		v.F32 = t.F32[lo:hi:hi]
	}
	if t.I64 != nil {
		v.I64 = t.I64[lo:hi:hi]
	}
	if t.I32 != nil {
		v.I32 = t.I32[lo:hi:hi]
	}
	if t.U8 != nil {
		v.U8 = t.U8[lo:hi:hi]
	}
	return v, nil
}

// CopyRow implements RowDevice (no view is made: a ragged step copies
// thousands of rows).
func (d *HostDevice) CopyRow(dst Buffer, row int, src Buffer) error {
	t, s, err := hostPair(dst, src)
	if err != nil {
		return err
	}
	lo, hi, err := rowRange(t, row)
	if err != nil {
		return err
	}
	n := hi - lo
	width := func(has bool) int {
		if has {
			return n
		}
		return 0
	}
	if len(s.F32) != width(t.F32 != nil) || len(s.I64) != width(t.I64 != nil) || len(s.I32) != width(t.I32 != nil) || len(s.U8) != width(t.U8 != nil) {
		return fmt.Errorf("copying a %v %s tensor into a row of %v", s.Shape, s.DType, t.Shape)
	}
	copyRange(t, lo, s, 0, n)
	return nil
}

// CopyRows copies row srow of src's leading axis into row drow of dst's:
// CopyRow of a RowView of src, without the view.
func (d *HostDevice) CopyRows(dst Buffer, drow int, src Buffer, srow int) error {
	t, s, err := hostPair(dst, src)
	if err != nil {
		return err
	}
	dlo, dhi, err := rowRange(t, drow)
	if err != nil {
		return err
	}
	slo, shi, err := rowRange(s, srow)
	if err != nil {
		return err
	}
	if shi-slo != dhi-dlo || (s.F32 == nil) != (t.F32 == nil) || (s.I64 == nil) != (t.I64 == nil) || (s.I32 == nil) != (t.I32 == nil) || (s.U8 == nil) != (t.U8 == nil) {
		return fmt.Errorf("copying row %d of a %v %s tensor into a row of %v", srow, s.Shape, s.DType, t.Shape)
	}
	copyRange(t, dlo, s, slo, shi-slo)
	return nil
}

func hostPair(dst, src Buffer) (t, s *Tensor, err error) {
	if t, err = HostTensor(dst); err != nil {
		return nil, nil, err
	}
	if s, err = HostTensor(src); err != nil {
		return nil, nil, err
	}
	return t, s, nil
}

// copyRange copies n elements of s from slo into t at dlo, in every slice
// t has.
func copyRange(t *Tensor, dlo int, s *Tensor, slo, n int) {
	if t.F32 != nil {
		copy(t.F32[dlo:dlo+n], s.F32[slo:slo+n])
	}
	if t.I64 != nil {
		copy(t.I64[dlo:dlo+n], s.I64[slo:slo+n])
	}
	if t.I32 != nil {
		copy(t.I32[dlo:dlo+n], s.I32[slo:slo+n])
	}
	if t.U8 != nil {
		copy(t.U8[dlo:dlo+n], s.U8[slo:slo+n])
	}
}

// rowRange is the element range of row row of t's leading axis (RowView's
// checks).
func rowRange(t *Tensor, row int) (lo, hi int, err error) {
	if len(t.Shape) == 0 || row < 0 || row >= t.Shape[0] {
		return 0, 0, fmt.Errorf("row %d of a tensor of shape %v", row, t.Shape)
	}
	if t.Scale != nil || t.Parts != nil {
		return 0, 0, fmt.Errorf("row view of a quantised or stacked tensor")
	}
	n := t.NumElements() / t.Shape[0]
	return row * n, (row + 1) * n, nil
}

// Clone implements RowDevice.
func (d *HostDevice) Clone(b Buffer) (Buffer, error) {
	t, err := HostTensor(b)
	if err != nil {
		return nil, err
	}
	c := &Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...), Parts: t.Parts}
	if t.F32 != nil {
		c.F32 = append([]float32(nil), t.F32...)
	}
	if t.I64 != nil {
		c.I64 = append([]int64(nil), t.I64...)
	}
	if t.I32 != nil {
		c.I32 = append([]int32(nil), t.I32...)
	}
	if t.U8 != nil {
		c.U8 = append([]byte(nil), t.U8...)
	}
	if t.Scale != nil {
		c.Scale = append([]byte(nil), t.Scale...)
	}
	return c, nil
}
