package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
)

// TokenMapFile holds the Engram compressed-token map next to the checkpoint.
const TokenMapFile = "engram_token_map.safetensors"

// binder reads the weight nodes' tensors from a checkpoint and checks them
// against the plan (dtype, shape, no NaN scale, no non-finite value); the
// devices lay them out (Device.BindWeight), once per name and backend.
type binder struct {
	dir  string
	src  WeightSource // instead of dir, when not nil
	set  *safetensors.Set
	tmap *safetensors.File
	// derived is the token map derived from tokenizer.json when the
	// checkpoint has no token map file (derivedTokenMap).
	derived *safetensors.Tensor
	mu      sync.Mutex
	// bound holds each backend's buffers, by name|type (the graphs share
	// them) and by node (no key to build on every call).
	bound  map[string]map[string]backends.Buffer
	byNode map[string]map[*ir.Node]backends.Buffer
}

// WeightSource supplies a model's weights from elsewhere than a checkpoint
// directory (synth.Source: random weights generated in memory). The
// engine asks for each weight once per backend, when it binds it, and keeps
// nothing of what Weight returns but what BindWeight makes of it: a device
// that copies (a GPU) lets the host bytes go at once.
type WeightSource interface {
	// Weight returns weight node n's tensors as BindWeight takes them.
	Weight(n *ir.Node) (*backends.HostWeight, error)
	// StoredBytes is n's size as stored (codes, scales, every expert).
	StoredBytes(n *ir.Node) int64
	// TotalBytes is the size of every weight of the model as stored.
	TotalBytes() int64
}

func openSource(src WeightSource) *binder {
	return &binder{src: src, bound: map[string]map[string]backends.Buffer{}, byNode: map[string]map[*ir.Node]backends.Buffer{}}
}

func openCheckpoint(dir string) (*binder, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("model directory: %v", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("model directory %s: not a directory", dir)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	return &binder{dir: dir, set: set, bound: map[string]map[string]backends.Buffer{}, byNode: map[string]map[*ir.Node]backends.Buffer{}}, nil
}

func (b *binder) close() {
	if b.set != nil {
		b.set.Close()
	}
	if b.tmap != nil {
		b.tmap.Close()
	}
}

// weight returns the buffer of a weight node on device d of backend be,
// binding it on first use.
func (b *binder) weight(be string, d backends.Device, n *ir.Node) (backends.Buffer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.byNode[be][n]; ok { // every call asks again
		return t, nil
	}
	name := n.Attrs.Str("name", "")
	key := name + "|" + n.Type.String()
	t, ok := b.bound[be][key]
	if !ok {
		hw, err := b.host(n, name)
		if err != nil {
			return nil, err
		}
		if t, err = d.BindWeight(hw); err != nil {
			return nil, fmt.Errorf("backend %s: binding weight %q: %w", be, name, err)
		}
		if b.bound[be] == nil {
			b.bound[be] = map[string]backends.Buffer{}
		}
		b.bound[be][key] = t
	}
	if b.byNode[be] == nil {
		b.byNode[be] = map[*ir.Node]backends.Buffer{}
	}
	b.byNode[be][n] = t
	return t, nil
}

func dimsOf(t ir.Type) []int {
	out := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		out[i] = int(d.N)
	}
	return out
}

// host reads and checks the checkpoint tensor(s) of a weight node.
func (b *binder) host(n *ir.Node, name string) (*backends.HostWeight, error) {
	if b.src != nil {
		return b.src.Weight(n)
	}
	format := n.Attrs.Str("format", "")
	shape := dimsOf(n.Type)
	if e := n.Attrs.Int("experts", 0); e > 0 {
		stack := &backends.HostWeight{Node: n, Name: name, DType: n.Type.DType, Shape: shape, Format: format}
		for i := 0; i < int(e); i++ {
			part, err := b.one(strings.ReplaceAll(name, "{e}", fmt.Sprint(i)), format, n.Type.DType, shape[1:])
			if err != nil {
				return nil, err
			}
			part.Node = n
			stack.Parts = append(stack.Parts, part)
		}
		return stack, nil
	}
	w, err := b.one(name, format, n.Type.DType, shape)
	if err == nil {
		w.Node = n
	}
	return w, err
}

func (b *binder) get(name string) (*safetensors.Tensor, error) {
	t, ok := b.set.Get(name)
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q is missing from the checkpoint", b.dir, name)
	}
	return t, nil
}

func (b *binder) check(t *safetensors.Tensor, shape []int, dtypes ...string) error {
	ok := false
	for _, d := range dtypes {
		ok = ok || t.DType == d
	}
	if !ok {
		return fmt.Errorf("%s: tensor %q has dtype %s, want %s", t.File, t.Name, t.DType, strings.Join(dtypes, " or "))
	}
	if !slices.Equal(t.Shape, shape) {
		return fmt.Errorf("%s: tensor %q has shape %v, want %v", t.File, t.Name, t.Shape, shape)
	}
	return nil
}

func scaleName(name string) string { return strings.TrimSuffix(name, ".weight") + ".scale" }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scales loads an e8m0 scale tensor and refuses NaN (0xFF) entries.
func (b *binder) scales(name string, shape []int) ([]byte, error) {
	s, err := b.get(name)
	if err != nil {
		return nil, err
	}
	if err := b.check(s, shape, "F8_E8M0"); err != nil {
		return nil, err
	}
	for i, v := range s.Data {
		if v == 0xFF {
			return nil, fmt.Errorf("%s: tensor %q: NaN scale at element %d", s.File, s.Name, i)
		}
	}
	return s.Data, nil
}

// one reads and checks one checkpoint tensor of format format that the
// graph uses as dt[shape].
func (b *binder) one(name, format string, dt ir.DType, shape []int) (*backends.HostWeight, error) {
	hw := &backends.HostWeight{Name: name, DType: dt, Shape: shape, Format: format}
	switch format {
	case "i64":
		t, err := b.tokenMap(name, shape)
		if err != nil {
			return nil, err
		}
		hw.Stored, hw.Data = t.DType, t.Data
		return hw, nil
	case "bf16", "f32":
		t, err := b.get(name)
		if err != nil {
			return nil, err
		}
		want := []string{"BF16", "F32", "F16"}
		if err := b.check(t, shape, want...); err != nil {
			return nil, err
		}
		if i := firstNonFinite(t.DType, t.Data); i >= 0 {
			return nil, fmt.Errorf("%s: tensor %q: non-finite value at element %d", t.File, t.Name, i)
		}
		hw.Stored, hw.Data = t.DType, t.Data
		return hw, nil
	case "fp8", "fp8row":
		t, err := b.get(name)
		if err != nil {
			return nil, err
		}
		if err := b.check(t, shape, "F8_E4M3"); err != nil {
			return nil, err
		}
		sshape := []int{ceilDiv(shape[0], 32), ceilDiv(shape[1], 32)}
		if format == "fp8row" {
			sshape = []int{shape[0], ceilDiv(shape[1], 32)}
		}
		sc, err := b.scales(scaleName(name), sshape)
		if err != nil {
			return nil, err
		}
		hw.Stored, hw.Data, hw.Scale = t.DType, t.Data, sc
		return hw, nil
	case "fp4":
		t, err := b.get(name)
		if err != nil {
			return nil, err
		}
		if len(shape) != 2 {
			return nil, fmt.Errorf("%s: fp4 tensor %q: the plan wants shape %v, not a matrix", t.File, name, shape)
		}
		if shape[1]%32 != 0 {
			return nil, fmt.Errorf("%s: fp4 tensor %q: inner dim %d is not a multiple of 32", t.File, name, shape[1])
		}
		if err := b.check(t, []int{shape[0], shape[1] / 2}, "I8", "U8"); err != nil {
			return nil, err
		}
		sc, err := b.scales(scaleName(name), []int{shape[0], shape[1] / 32})
		if err != nil {
			return nil, err
		}
		hw.Stored, hw.Data, hw.Scale = t.DType, t.Data, sc
		return hw, nil
	}
	return nil, fmt.Errorf("weight %q: unknown format %q", name, format)
}

// firstNonFinite is the index of the first NaN or ±Inf among the values of
// a BF16, F16 or F32 tensor's little-endian bytes, or -1.
func firstNonFinite(dtype string, data []byte) int {
	switch dtype {
	case "BF16":
		for i := 1; i < len(data); i += 2 {
			if data[i]&0x7F == 0x7F && data[i-1]&0x80 != 0 { // exponent bits all ones
				return i / 2
			}
		}
	case "F16":
		for i := 1; i < len(data); i += 2 {
			if data[i]&0x7C == 0x7C {
				return i / 2
			}
		}
	case "F32":
		for i := 0; i+4 <= len(data); i += 4 {
			if f := math.Float32frombits(binary.LittleEndian.Uint32(data[i:])); f-f != 0 {
				return i / 4
			}
		}
	}
	return -1
}

func (b *binder) tokenMap(name string, shape []int) (*safetensors.Tensor, error) {
	if t, ok, err := b.derivedTokenMapTensor(name); err != nil {
		return nil, err
	} else if ok {
		if name != "token_map" || !slices.Equal(t.Shape, shape) {
			return nil, fmt.Errorf("%s: the Engram token map derived from it is I64%v, the plan reads %q as I64%v", t.File, t.Shape, name, shape)
		}
		return t, nil
	}
	if b.tmap == nil {
		path := filepath.Join(b.dir, TokenMapFile)
		f, err := safetensors.Open(path)
		if err != nil {
			return nil, fmt.Errorf("the Engram token map: %v", err)
		}
		b.tmap = f
	}
	t, ok := b.tmap.Get(name)
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q is missing", b.tmap.Path, name)
	}
	if t.DType != "I64" || !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("%s: tensor %q is %s%v, want I64%v", b.tmap.Path, name, t.DType, t.Shape, shape)
	}
	return t, nil
}

// storedBytes returns the checkpoint bytes of a weight node: its codes or
// values, its scales, and every expert of an expert stack.
func (b *binder) storedBytes(n *ir.Node) int64 {
	if b.src != nil {
		return b.src.StoredBytes(n)
	}
	name, format := n.Attrs.Str("name", ""), n.Attrs.Str("format", "")
	one := func(name string) int64 {
		if format == "i64" {
			if b.tmap == nil {
				return 0
			}
			if t, ok := b.tmap.Get(name); ok {
				return int64(len(t.Data))
			}
			return 0
		}
		var s int64
		if t, ok := b.set.Get(name); ok {
			s += int64(len(t.Data))
		}
		if format == "fp8" || format == "fp8row" || format == "fp4" {
			if t, ok := b.set.Get(scaleName(name)); ok {
				s += int64(len(t.Data))
			}
		}
		return s
	}
	if e := n.Attrs.Int("experts", 0); e > 0 {
		var s int64
		for i := range int(e) {
			s += one(strings.ReplaceAll(name, "{e}", strconv.Itoa(i)))
		}
		return s
	}
	return one(name)
}

// checkpointBytes is the size of the checkpoint's mapped files (the
// safetensors shards and the Engram token map).
func (b *binder) checkpointBytes() int64 {
	if b.src != nil {
		return b.src.TotalBytes()
	}
	var n int64
	paths := []string{filepath.Join(b.dir, TokenMapFile)}
	for _, f := range b.set.Files() {
		paths = append(paths, f.Path)
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// CheckpointBytes is the size of the checkpoint's files (for reports).
func (m *Model) CheckpointBytes() int64 { return m.w.checkpointBytes() }

// WeightBytes is a weight node's size as the checkpoint stores it and as
// its device holds it (Buffer.Bytes of what BindWeight made), for reports.
func (m *Model) WeightBytes(n *ir.Node) (stored, held int64, err error) {
	be := m.Placement.Backend[n]
	if be == "" {
		be = m.PrefillPlacement.Backend[n]
	}
	b, err := m.weight(be, n)
	if err != nil {
		return 0, 0, err
	}
	return m.w.storedBytes(n), b.Bytes(), nil
}
