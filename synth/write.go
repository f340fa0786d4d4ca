package synth

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// TokenMapFile is the name of the Engram token map next to the shards.
const TokenMapFile = "engram_token_map.safetensors"

// DefaultShardBytes is the shard size used when Options.ShardBytes is 0.
const DefaultShardBytes = 1 << 30

// chunkBytes is the target size of one generated chunk.
const chunkBytes = 4 << 20

// Options tune Write.
type Options struct {
	// ShardBytes bounds the data of one shard (a tensor larger than it
	// gets a shard of its own). 0 means DefaultShardBytes.
	ShardBytes int64
	// Workers generating chunks in parallel; 0 means GOMAXPROCS.
	Workers int
}

// Report describes a written checkpoint.
type Report struct {
	Dir     string
	Tensors int   // tensors in the shards (weights and scales)
	Shards  int   // shard files
	Bytes   int64 // tensor data bytes in the shards (index total_size)
	Elapsed time.Duration
}

// MBps is the write rate in MB/s (10^6 bytes).
func (r *Report) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

func (r *Report) String() string {
	return fmt.Sprintf("%d tensors, %.1f MB in %d shard(s) in %.2fs (%.0f MB/s) to %s",
		r.Tensors, float64(r.Bytes)/1e6, r.Shards, r.Elapsed.Seconds(), r.MBps(), r.Dir)
}

// Write writes a random checkpoint for c into dir (created if needed):
// config.json, the shards and their index, and the Engram token map when
// the model has Engram layers. The same config, seed and options give the
// same bytes. The files are written into a temporary directory and moved
// into dir at the end (internal/fileio.CreateDir): a failed or interrupted
// Write leaves dir as it was, and files of dir that Write does not write
// are kept. Errors name the files under dir.
func Write(dir string, c *deepseekv4.Config, seed uint64, opts Options) error {
	_, err := Generate(dir, c, seed, opts)
	return err
}

// Generate is Write returning a report.
func Generate(dir string, c *deepseekv4.Config, seed uint64, opts Options) (*Report, error) {
	start := time.Now()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ts, vocab, err := plan(c, seed)
	if err != nil {
		return nil, err
	}
	limit := opts.ShardBytes
	if limit <= 0 {
		limit = DefaultShardBytes
	}
	shards := assign(ts, limit)
	out, err := fileio.CreateDir(dir)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed { // an error or a panic
			out.Remove()
		}
	}()
	if err := writeConfig(out, c); err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	rep := &Report{Dir: dir, Tensors: len(ts), Shards: len(shards)}
	weightMap := map[string]string{}
	for i, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := writeShard(out, name, sh, workers); err != nil {
			return nil, err
		}
		for _, t := range sh {
			weightMap[t.name] = name
			rep.Bytes += t.bytes()
		}
	}
	idx := map[string]any{"metadata": map[string]any{"total_size": rep.Bytes}, "weight_map": weightMap}
	b, _ := json.MarshalIndent(idx, "", "  ")
	if err := out.WriteFile(safetensors.IndexFile, append(b, '\n')); err != nil {
		return nil, err
	}
	if vocab > 0 {
		if err := writeTokenMap(out, vocab, c.EngramCompressedVocabSize, seed); err != nil {
			return nil, err
		}
	}
	if err := out.Commit(); err != nil {
		return nil, err
	}
	committed = true
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// assign puts the tensors into shards of at most limit data bytes, a weight
// and its scale together, and sets every tensor's shard and offset.
func assign(ts []*tensor, limit int64) [][]*tensor {
	var shards [][]*tensor
	var cur []*tensor
	var size int64
	for i := 0; i < len(ts); {
		unit := ts[i : i+1]
		if ts[i].scale != nil && i+1 < len(ts) && ts[i+1] == ts[i].scale {
			unit = ts[i : i+2]
		}
		var ub int64
		for _, t := range unit {
			ub += t.bytes()
		}
		if len(cur) > 0 && size+ub > limit {
			shards = append(shards, cur)
			cur, size = nil, 0
		}
		for _, t := range unit {
			t.shard, t.offset = len(shards), size
			size += t.bytes()
			cur = append(cur, t)
		}
		i += len(unit)
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}
	return shards
}

// writeConfig writes c as the flat config.json, lists left nil as []:
// LoadConfig refuses null.
func writeConfig(out *fileio.Dir, c *deepseekv4.Config) error {
	cc := *c
	v := reflect.ValueOf(&cc).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.IsNil() && f.CanSet() {
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		}
	}
	b, err := json.MarshalIndent(&cc, "", "  ")
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return out.WriteFile("config.json", append(b, '\n'))
}

// header renders the safetensors header of a shard, padded to 8 bytes.
func header(sh []*tensor) []byte {
	var h strings.Builder
	h.WriteString(`{"__metadata__":{"format":"pt"}`)
	for _, t := range sh {
		nb, _ := json.Marshal(t.name)
		h.WriteByte(',')
		h.Write(nb)
		h.WriteString(`:{"dtype":"` + t.dtype + `","shape":[`)
		for k, d := range t.shape {
			if k > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, t.offset, t.offset+t.bytes())
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	out := make([]byte, 8, 8+h.Len())
	binary.LittleEndian.PutUint64(out, uint64(h.Len()))
	return append(out, h.String()...)
}

// jobs splits the tensors of a shard into chunks of about chunkBytes.
func jobs(sh []*tensor) []job {
	var out []job
	for _, t := range sh {
		if t.kind == kindScale {
			continue
		}
		rows, _ := t.logical()
		rowBytes := max(t.bytes()/int64(rows), 1)
		step := int(max(chunkBytes/rowBytes, 1))
		if t.kind == kindFP8 {
			step = ceilDiv(step, 32) * 32
		}
		for r0, i := 0, 0; r0 < rows; r0, i = r0+step, i+1 {
			out = append(out, job{t: t, r0: r0, r1: min(r0+step, rows), idx: i})
		}
	}
	return out
}

// runJobs runs fn on every job over up to workers goroutines, each with a
// scratch of its own. It returns the first error and the first panic (a
// bug of ours, caught so the caller reports it on its own goroutine).
func runJobs(js []job, workers int, fn func(job, *scratch) error) (bug any, err error) {
	ch := make(chan job)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	one := func(j job, sc *scratch) (jbug any, jerr error) {
		defer func() { jbug = recover() }()
		return nil, fn(j, sc)
	}
	for w := 0; w < min(workers, max(len(js), 1)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc scratch
			for j := range ch {
				jbug, jerr := one(j, &sc)
				mu.Lock()
				if err == nil {
					err = jerr
				}
				if bug == nil {
					bug = jbug
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range js {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return bug, err
}

// writeShard writes the header, then every chunk in place at its offset.
func writeShard(out *fileio.Dir, name string, sh []*tensor, workers int) (err error) {
	hdr := header(sh)
	var size int64
	for _, t := range sh {
		size += t.bytes()
	}
	f, err := os.Create(filepath.Join(out.Path(), name))
	if err != nil {
		return out.Err(name, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = out.Err(name, cerr)
		}
	}()
	if _, err := f.Write(hdr); err != nil {
		return out.Err(name, err)
	}
	base := int64(len(hdr))
	if err := f.Truncate(base + size); err != nil {
		return out.Err(name, err)
	}
	bug, first := runJobs(jobs(sh), workers, func(j job, sc *scratch) error { return writeJob(f, base, j, sc) })
	if bug != nil {
		// On the caller's goroutine, where internal/cli reports it as an
		// internal error; in a worker it would end the process with a trace.
		panic(bug)
	}
	if first != nil {
		return out.Err(name, first)
	}
	if base+size >= 2<<20 {
		// Drop the shard from the page cache once it is on disk: the pages
		// written here are small folios, and a mapping can use 2 MiB pages
		// only for 2 MiB folios, which the first load then reads back
		// (internal/safetensors.mapFile). Best effort.
		if f.Sync() == nil {
			dropPageCache(f)
		}
	}
	return nil
}

func writeJob(f *os.File, base int64, j job, s *scratch) error {
	t := j.t
	rows, _ := t.logical()
	rowBytes := t.bytes() / int64(rows)
	data, scales := gen(j, s)
	if _, err := f.WriteAt(data, base+t.offset+int64(j.r0)*rowBytes); err != nil {
		return err
	}
	if t.scale == nil {
		return nil
	}
	sc := t.scale
	srow := int64(sc.shape[1])
	first := int64(j.r0)
	if t.kind == kindFP8 {
		first = int64(j.r0 / 32)
	}
	_, err := f.WriteAt(scales, base+sc.offset+first*srow)
	return err
}

// writeTokenMap writes token_map I64 [vocab], uniform in [0, cv).
func writeTokenMap(out *fileio.Dir, vocab int, cv int64, seed uint64) error {
	if cv <= 0 {
		return fmt.Errorf("engram_compressed_vocab_size is %d, want > 0 for the Engram token map", cv)
	}
	b, err := safetensors.Encode([]safetensors.WriteTensor{
		{Name: "token_map", DType: "I64", Shape: []int{vocab}, Data: safetensors.I64Bytes(tokenMapValues(vocab, cv, seed))},
	}, nil)
	if err != nil {
		return err
	}
	return out.WriteFile(TokenMapFile, b)
}

// tokenMapValues is the token map of Write and Source: vocab entries
// uniform in [0, cv) (cv > 0).
func tokenMapValues(vocab int, cv int64, seed uint64) []int64 {
	r := newRNG(nameSeed(seed, "token_map"))
	m := make([]int64, vocab)
	for i := range m {
		m[i] = int64(r.next() % uint64(cv))
	}
	return m
}
