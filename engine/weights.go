package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
)

// TokenMapFile holds the Engram compressed-token map next to the checkpoint.
const TokenMapFile = "engram_token_map.safetensors"

// binder resolves weight nodes to tensors of a checkpoint, once per name.
type binder struct {
	dir    string
	set    *safetensors.Set
	tmap   *safetensors.File
	mu     sync.Mutex
	loaded map[string]*backends.Tensor
	byNode map[*ir.Node]*backends.Tensor // the same tensors by node (no key to build)
	// stored16 drops the F32 copy of bf16 matrices declared F32: set when
	// every op runs on the CPU backend, whose kernels read the bf16 view
	// (and widen it themselves where they need F32).
	stored16 bool
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
	return &binder{dir: dir, set: set, loaded: map[string]*backends.Tensor{}}, nil
}

func (b *binder) close() {
	if b.set != nil {
		b.set.Close()
	}
	if b.tmap != nil {
		b.tmap.Close()
	}
}

// weight binds one weight node.
func (b *binder) weight(n *ir.Node) (*backends.Tensor, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.byNode[n]; ok { // every decode step asks again
		return t, nil
	}
	name := n.Attrs.Str("name", "")
	key := name + "|" + n.Type.String()
	t, ok := b.loaded[key]
	if !ok {
		var err error
		if t, err = b.bind(n, name); err != nil {
			return nil, err
		}
		b.loaded[key] = t
	}
	if b.byNode == nil {
		b.byNode = map[*ir.Node]*backends.Tensor{}
	}
	b.byNode[n] = t
	return t, nil
}

func dimsOf(t ir.Type) []int {
	out := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		out[i] = int(d.N)
	}
	return out
}

func (b *binder) bind(n *ir.Node, name string) (*backends.Tensor, error) {
	format := n.Attrs.Str("format", "")
	shape := dimsOf(n.Type)
	if e := n.Attrs.Int("experts", 0); e > 0 {
		stack := &backends.Tensor{DType: n.Type.DType, Shape: shape}
		for i := 0; i < int(e); i++ {
			part, err := b.one(strings.ReplaceAll(name, "{e}", fmt.Sprint(i)), format, n.Type.DType, shape[1:])
			if err != nil {
				return nil, err
			}
			stack.Parts = append(stack.Parts, part)
		}
		return stack, nil
	}
	return b.one(name, format, n.Type.DType, shape)
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

func (b *binder) one(name, format string, dt ir.DType, shape []int) (*backends.Tensor, error) {
	switch format {
	case "i64":
		return b.tokenMap(name, shape)
	case "bf16", "f32":
		t, err := b.get(name)
		if err != nil {
			return nil, err
		}
		want := []string{"BF16", "F32", "F16"}
		if err := b.check(t, shape, want...); err != nil {
			return nil, err
		}
		if t.DType == "BF16" && len(shape) == 2 && len(t.Data) == 2*shape[0]*shape[1] {
			return b.bf16Matrix(t, dt, shape)
		}
		v, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("%s: tensor %q: non-finite value at element %d", t.File, name, i)
			}
		}
		if dt == ir.BF16 {
			numfmt.BF16RoundSlice(v)
		}
		return &backends.Tensor{DType: dt, Shape: shape, F32: v}, nil
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
		if dt == ir.F8E4M3 {
			return &backends.Tensor{DType: dt, Shape: shape, U8: t.Data, Scale: sc}, nil
		}
		// attn.wo_a, used as bf16(e4m3·e8m0) (the reference's converter
		// dequantises it at load): kept as stored (codes in U8, scales in
		// Scale, F32 nil) and dequantised on the fly by its consumer, the CPU
		// grouped_matmul (backends/cpu/ops.go), bit for bit.
		if format == "fp8" {
			return &backends.Tensor{DType: dt, Shape: shape, U8: t.Data, Scale: sc}, nil
		}
		v := make([]float32, shape[0]*shape[1])
		for o := 0; o < shape[0]; o++ {
			for i := 0; i < shape[1]; i++ {
				s := numfmt.E8M0ToF32(sc[o*sshape[1]+i/32])
				v[o*shape[1]+i] = numfmt.BF16Round(numfmt.E4M3ToF32(t.Data[o*shape[1]+i]) * s)
			}
		}
		return &backends.Tensor{DType: dt, Shape: shape, F32: v}, nil
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
		return &backends.Tensor{DType: dt, Shape: shape, U8: t.Data, Scale: sc}, nil
	}
	return nil, fmt.Errorf("weight %q: unknown format %q", name, format)
}

// bf16Matrix binds a matrix stored in BF16 without converting it: U8 holds
// the mapped little-endian bf16 bytes (2 per value) and the CPU kernels
// (backends/cpu/ops.go: embed, matmul) widen on the fly, bit-identically to
// converting first. Declared BF16, it has no F32 copy (the values are
// exact); declared F32 (head, gate, compressor, Engram weights), it keeps
// the F32 copy too, for backends and ops that read F32, while the CPU
// matmul reads the half-size bf16 view; with stored16 (every op on the CPU
// backend) it has none either: the CPU ops that need F32 widen it
// (backends/cpu/ops.go widenStored).
func (b *binder) bf16Matrix(t *safetensors.Tensor, dt ir.DType, shape []int) (*backends.Tensor, error) {
	raw := t.Data
	for i := 1; i < len(raw); i += 2 {
		// exponent bits all ones: Inf or NaN
		if raw[i]&0x7F == 0x7F && raw[i-1]&0x80 != 0 {
			return nil, fmt.Errorf("%s: tensor %q: non-finite value at element %d", t.File, t.Name, i/2)
		}
	}
	out := &backends.Tensor{DType: dt, Shape: shape, U8: raw}
	if dt != ir.BF16 && !b.stored16 {
		v := make([]float32, len(raw)/2)
		for i := range v {
			v[i] = math.Float32frombits(uint32(raw[2*i])<<16 | uint32(raw[2*i+1])<<24)
		}
		out.F32 = v
	}
	return out, nil
}

func (b *binder) tokenMap(name string, shape []int) (*backends.Tensor, error) {
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
	v, err := t.Int64s()
	if err != nil {
		return nil, err
	}
	return &backends.Tensor{DType: ir.I64, Shape: shape, I64: v}, nil
}
