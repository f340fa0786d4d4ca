package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
)

// Tracer records probe values under the golden naming (docs/trace-format.md)
// and, when it has a teacher file, replaces forced probes (block input
// streams and pre mixes) by the file's tensors of the same name.
type Tracer struct {
	Record  bool
	Teacher *safetensors.File
	out     map[string]safetensors.WriteTensor
}

// NewTracer returns a tracer; teacher may be nil.
func NewTracer(record bool, teacher *safetensors.File) *Tracer {
	return &Tracer{Record: record, Teacher: teacher, out: map[string]safetensors.WriteTensor{}}
}

func (tr *Tracer) put(name, dtype string, shape []int, data []byte) {
	tr.out[name] = safetensors.WriteTensor{Name: name, DType: dtype, Shape: append([]int(nil), shape...), Data: data}
}

func (tr *Tracer) putTensor(name string, t *backends.Tensor, shape []int) {
	switch {
	case t.DType.IsFloat():
		tr.put(name, "F32", shape, safetensors.F32Bytes(t.F32))
	case t.DType == ir.I32:
		tr.put(name, "I32", shape, safetensors.I32Bytes(t.I32))
	case t.DType == ir.I64:
		tr.put(name, "I64", shape, safetensors.I64Bytes(t.I64))
	default:
		tr.put(name, "U8", shape, safetensors.U8Bytes(t.U8))
	}
}

func (tr *Tracer) probe(prefix string, B, S int) func(string, bool, *backends.Tensor) (*backends.Tensor, error) {
	return func(name string, force bool, t *backends.Tensor) (*backends.Tensor, error) {
		full := prefix + name
		if tr.Record {
			shape := t.Shape
			v := t
			if strings.HasSuffix(name, ".pre_in") && len(t.Shape) == 1 {
				// The layer-0 one-hot is a constant; the trace holds it per token.
				v = &backends.Tensor{DType: t.DType, Shape: []int{B, S, t.Shape[0]}, F32: perToken(t.F32, B*S)}
				shape = v.Shape
			}
			skip := strings.HasSuffix(name, "compressor_latent") && len(t.Shape) > 1 && t.Shape[1] == 0
			if !skip {
				tr.putTensor(full, v, shape)
			}
		}
		if force && tr.Teacher != nil {
			g, ok := tr.Teacher.Get(full)
			if !ok {
				return t, nil
			}
			want := t.Shape
			if strings.HasSuffix(name, ".pre_in") && len(t.Shape) == 1 {
				want = []int{B, S, t.Shape[0]} // the layer-0 constant, per token in the file
			}
			if !slices.Equal(g.Shape, want) {
				return nil, fmt.Errorf("%s: tensor %q has shape %v, the run's value has %v", tr.Teacher.Path, full, g.Shape, want)
			}
			vals, err := g.Float32s()
			if err != nil {
				return nil, err // names the file and the tensor
			}
			return &backends.Tensor{DType: t.DType, Shape: append([]int(nil), g.Shape...), F32: vals}, nil
		}
		return t, nil
	}
}

func perToken(v []float32, tokens int) []float32 {
	out := make([]float32, 0, tokens*len(v))
	for i := 0; i < tokens; i++ {
		out = append(out, v...)
	}
	return out
}

func (tr *Tracer) logits(prefix string, l *Logits, full bool) {
	if !tr.Record {
		return
	}
	last := make([]float32, 0, l.B*l.V)
	for _, row := range l.Last() {
		last = append(last, row...)
	}
	if full {
		tr.put(prefix+"logits_full", "F32", []int{l.B, l.S, l.V}, safetensors.F32Bytes(l.Data))
		tr.put(prefix+"logits_last", "F32", []int{l.B, l.V}, safetensors.F32Bytes(last))
	} else {
		tr.put(prefix+"logits", "F32", []int{l.B, l.V}, safetensors.F32Bytes(last))
	}
}

// caches records the caches under prefix: windows whole, compressed rows and
// index keys up to the rows written so far.
func (tr *Tracer) caches(prefix string, s *Session) {
	if !tr.Record {
		return
	}
	names := make([]string, 0, len(s.state))
	for n := range s.state {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := s.State(n)
		if t == nil {
			continue
		}
		switch {
		case strings.HasSuffix(n, ".window_kv_cache"):
			tr.putTensor(prefix+n, t, t.Shape)
		case strings.HasSuffix(n, ".compress_kv_cache"), strings.HasSuffix(n, ".index_k_cache"):
			r := s.ratios[n]
			B, Mr, D := t.Shape[0], t.Shape[1], t.Shape[2]
			nc := min(s.Pos/r, Mr)
			v := make([]float32, 0, B*nc*D)
			for b := 0; b < B; b++ {
				v = append(v, t.F32[b*Mr*D:(b*Mr+nc)*D]...)
			}
			tr.put(prefix+n, "F32", []int{B, nc, D}, safetensors.F32Bytes(v))
		}
	}
}

// Put adds an extra tensor (inputs, generated ids) to the trace.
func (tr *Tracer) Put(name string, ids [][]int64) {
	var flat []int64
	for _, r := range ids {
		flat = append(flat, r...)
	}
	tr.put(name, "I64", []int{len(ids), len(ids[0])}, safetensors.I64Bytes(flat))
}

// Write stores the trace through safetensors.WriteFile (a regular file
// atomically, a device directly).
func (tr *Tracer) Write(path string) error {
	ts := make([]safetensors.WriteTensor, 0, len(tr.out))
	for _, t := range tr.out {
		ts = append(ts, t)
	}
	return safetensors.WriteFile(path, ts, map[string]string{"format": "ds4 trace v1"})
}

// TraceIDs reads the token ids a trace or golden file holds under name
// (inputs.input_ids, inputs.decode_input_ids): an integer tensor [rows,
// tokens] with at least one of each; anything else names the file and the
// tensor.
func TraceIDs(f *safetensors.File, name string) ([][]int64, error) {
	t, ok := f.Get(name)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	case len(t.Shape) != 2 || t.Shape[0] == 0 || t.Shape[1] == 0:
		return nil, fmt.Errorf("%s: tensor %q has shape %v, want [rows, tokens] with at least one of each", f.Path, name, t.Shape)
	}
	v, err := t.Int64s() // an error names the file and the tensor
	if err != nil {
		return nil, err
	}
	rows := make([][]int64, t.Shape[0])
	for i := range rows {
		rows[i] = v[i*t.Shape[1] : (i+1)*t.Shape[1]]
	}
	return rows, nil
}
