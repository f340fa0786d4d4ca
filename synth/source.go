package synth

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// Source is a model's random weights generated in memory, tensor by
// tensor when the engine binds them (engine.OpenSource), instead of read
// from a checkpoint directory: `exec -bench -synthetic -config FILE`. Its
// bytes are those Write would put in the shards and token map for the same
// config and seed (the same chunks from the same seeds), so a run on a
// Source reads the weights of the checkpoint Write makes.
type Source struct {
	byName  map[string]*tensor
	vocab   int   // token map entries (0: none)
	cv      int64 // engram_compressed_vocab_size
	seed    uint64
	workers int
	total   int64

	genBytes atomic.Int64 // generated so far
	genNanos atomic.Int64 // wall time spent generating
}

// NewSource plans the tensors of config c (as Write would write them);
// nothing is generated until Weight asks. opts.Workers sets the generating
// goroutines (0: GOMAXPROCS); ShardBytes is not used.
func NewSource(c *deepseekv4.Config, seed uint64, opts Options) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ts, vocab, err := plan(c, seed)
	if err != nil {
		return nil, err
	}
	s := &Source{byName: map[string]*tensor{}, vocab: vocab, cv: c.EngramCompressedVocabSize, seed: seed, workers: opts.Workers}
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	for _, t := range ts {
		s.byName[t.name] = t
		s.total += t.bytes()
	}
	if vocab > 0 {
		if s.cv <= 0 {
			return nil, fmt.Errorf("engram_compressed_vocab_size is %d, want > 0 for the Engram token map", s.cv)
		}
		s.total += 8 * int64(vocab)
	}
	return s, nil
}

// TotalBytes is the size of every tensor of the model as stored (shards'
// data and the token map), generated or not.
func (s *Source) TotalBytes() int64 { return s.total }

// Generated returns the bytes generated so far and the wall time it took.
func (s *Source) Generated() (int64, time.Duration) {
	return s.genBytes.Load(), time.Duration(s.genNanos.Load())
}

// storedNames lists the stored names of a weight node (one per expert of a stack).
func storedNames(n *ir.Node) []string {
	name := n.Attrs.Str("name", "")
	e := int(n.Attrs.Int("experts", 0))
	if e <= 0 {
		return []string{name}
	}
	out := make([]string, e)
	for i := range out {
		out[i] = strings.ReplaceAll(name, "{e}", fmt.Sprint(i))
	}
	return out
}

// StoredBytes is a weight node's bytes as stored: codes or values, scales,
// every expert of a stack.
func (s *Source) StoredBytes(n *ir.Node) int64 {
	if n.Attrs.Str("format", "") == "i64" {
		return 8 * int64(s.vocab)
	}
	var b int64
	for _, nm := range storedNames(n) {
		if t, ok := s.byName[nm]; ok {
			b += t.bytes()
			if t.scale != nil {
				b += t.scale.bytes()
			}
		}
	}
	return b
}

// Weight generates the stored tensors of weight node n (every expert of a
// stack, in parallel) and returns them as BindWeight takes them. The
// memory is the caller's: nothing is kept here.
func (s *Source) Weight(n *ir.Node) (*backends.HostWeight, error) {
	start := time.Now()
	name, format := n.Attrs.Str("name", ""), n.Attrs.Str("format", "")
	shape := make([]int, len(n.Type.Shape))
	for i, d := range n.Type.Shape {
		shape[i] = int(d.N)
	}
	if format == "i64" {
		if s.vocab == 0 || len(shape) != 1 || shape[0] != s.vocab {
			return nil, fmt.Errorf("weight %q: the synthetic token map is I64[%d], the plan reads I64%v", name, s.vocab, shape)
		}
		data := safetensors.I64Bytes(tokenMapValues(s.vocab, s.cv, s.seed))
		s.count(int64(len(data)), start)
		return &backends.HostWeight{Node: n, Name: name, DType: n.Type.DType, Shape: shape, Format: format, Stored: "I64", Data: data}, nil
	}
	nms := storedNames(n)
	partShape := shape
	if len(nms) > 1 || n.Attrs.Int("experts", 0) > 0 {
		partShape = shape[1:]
	}
	parts := make([]*backends.HostWeight, len(nms))
	var ts []*tensor
	for i, nm := range nms {
		t, ok := s.byName[nm]
		if !ok {
			return nil, fmt.Errorf("weight %q: not a tensor of the synthetic model (config and plan differ?)", nm)
		}
		ts = append(ts, t)
		parts[i] = &backends.HostWeight{Node: n, Name: nm, DType: n.Type.DType, Shape: partShape, Format: format, Stored: t.dtype,
			Data: make([]byte, t.bytes())}
		if t.scale != nil {
			parts[i].Scale = make([]byte, t.scale.bytes())
		}
	}
	if err := s.fill(ts, parts); err != nil {
		return nil, err
	}
	var b int64
	for _, p := range parts {
		b += int64(len(p.Data) + len(p.Scale))
	}
	s.count(b, start)
	if n.Attrs.Int("experts", 0) > 0 {
		return &backends.HostWeight{Node: n, Name: name, DType: n.Type.DType, Shape: shape, Format: format, Parts: parts}, nil
	}
	return parts[0], nil
}

func (s *Source) count(b int64, start time.Time) {
	s.genBytes.Add(b)
	s.genNanos.Add(int64(time.Since(start)))
}

// fill generates tensors ts into the Data and Scale of parts (same order):
// the chunks of Write (jobs), each drawn straight into its place.
func (s *Source) fill(ts []*tensor, parts []*backends.HostWeight) (err error) {
	dst := map[*tensor]*backends.HostWeight{}
	for i, t := range ts {
		dst[t] = parts[i]
	}
	if bug, _ := runJobs(jobs(ts), s.workers, func(j job, sc *scratch) error { fillJob(j, dst[j.t], sc); return nil }); bug != nil {
		return fmt.Errorf("internal error generating synthetic weights: %v", bug)
	}
	return nil
}

// fillJob draws one chunk in place: gen writes into the scratch slices,
// which here are the destination's own rows (capacity exactly the chunk's).
func fillJob(j job, hw *backends.HostWeight, sc *scratch) {
	t := j.t
	rows, _ := t.logical()
	rowBytes := t.bytes() / int64(rows)
	d0, d1 := int64(j.r0)*rowBytes, int64(j.r1)*rowBytes
	sc.out = hw.Data[d0:d1:d1]
	if t.scale != nil {
		srow := int64(t.scale.shape[1])
		first, last := int64(j.r0), int64(j.r1)
		if t.kind == kindFP8 {
			first, last = int64(j.r0/32), int64(ceilDiv(j.r1, 32))
		}
		sc.sc = hw.Scale[first*srow : last*srow : last*srow]
	}
	data, scales := gen(j, sc)
	// gen grows into the given slices (their capacity is exact); copy only
	// if it had to allocate (a bug, but then still correct).
	if len(data) > 0 && &data[0] != &hw.Data[d0] {
		copy(hw.Data[d0:d1], data)
	}
	if t.scale != nil && len(scales) > 0 {
		srow := int64(t.scale.shape[1])
		first := int64(j.r0)
		if t.kind == kindFP8 {
			first = int64(j.r0 / 32)
		}
		if &scales[0] != &hw.Scale[first*srow] {
			copy(hw.Scale[first*srow:], scales)
		}
	}
	sc.out, sc.sc = nil, nil // never reuse the destination as scratch
}
