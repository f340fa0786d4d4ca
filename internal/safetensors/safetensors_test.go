package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const tinyDir = "../../testdata/tiny"

func TestOpenDirTiny(t *testing.T) {
	s, err := OpenDir(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	b, err := os.ReadFile(filepath.Join(tinyDir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	names := s.Names()
	if len(names) != len(idx.WeightMap) {
		t.Errorf("%d tensors, index lists %d", len(names), len(idx.WeightMap))
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatal("Names not sorted")
		}
	}
	if len(s.Files()) != 2 {
		t.Errorf("%d files", len(s.Files()))
	}
	raw := map[string][]byte{}
	for _, n := range names {
		tn, ok := s.Get(n)
		if !ok {
			t.Fatalf("Get(%q) failed", n)
		}
		if filepath.Base(tn.File) != idx.WeightMap[n] {
			t.Errorf("%s in %s, index says %s", n, tn.File, idx.WeightMap[n])
		}
		if raw[tn.File] == nil {
			raw[tn.File], _ = os.ReadFile(tn.File)
		}
		if !bytes.Equal(raw[tn.File][tn.Offset:tn.Offset+int64(len(tn.Data))], tn.Data) {
			t.Errorf("%s: Data differs from the file at Offset %d", n, tn.Offset)
		}
	}
	e, ok := s.Get("embed.weight")
	if !ok || e.DType != BF16 || !reflect.DeepEqual(e.Shape, []int{512, 128}) || e.NumElements() != 512*128 {
		t.Fatalf("embed.weight: %+v", e)
	}
	v, err := e.Float32s()
	if err != nil || len(v) != 512*128 {
		t.Fatal(err)
	}
	if _, ok := s.Get("nope"); ok {
		t.Error("Get of an absent tensor succeeded")
	}
	// Every tensor of every dtype converts.
	for _, n := range names {
		tn, _ := s.Get(n)
		if _, err := tn.Float32s(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func TestOpsFile(t *testing.T) {
	f, err := Open(filepath.Join(tinyDir, "ops.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	get := func(n string) *Tensor {
		tn, ok := f.Get(n)
		if !ok {
			t.Fatalf("%s missing", n)
		}
		return tn
	}
	for _, p := range []string{"act_quant.", "fp4_act_quant_e8m0_b32.", "fp4_act_quant_e4m3_b16."} {
		sc, err := get(p + "scale").Float32s()
		if err != nil {
			t.Fatal(err)
		}
		sf, _ := get(p + "scale_f32").Float32s()
		if !reflect.DeepEqual(sc, sf) {
			t.Errorf("%sscale decoded != scale_f32", p)
		}
	}
	idx := get("gate.indices")
	i64, err := idx.Int64s()
	if err != nil || len(i64) != 30 {
		t.Fatal(err)
	}
	i32, err := idx.Int32s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range i64 {
		if int64(i32[i]) != i64[i] || i64[i] < 0 || i64[i] >= 8 {
			t.Fatalf("gate.indices[%d] = %d", i, i64[i])
		}
	}
	ti := get("sparse_attn.topk_idxs")
	if ti.DType != I32 {
		t.Fatal(ti.DType)
	}
	if _, err := ti.Int32s(); err != nil {
		t.Fatal(err)
	}
	if _, err := get("rmsnorm.x").Int64s(); err == nil || !strings.Contains(err.Error(), "rmsnorm.x") {
		t.Errorf("Int64s of F32: %v", err)
	}
	if f.Metadata != nil && len(f.Metadata) == 0 {
		t.Error("empty metadata map")
	}
	if len(f.Names()) < 50 {
		t.Errorf("only %d names", len(f.Names()))
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rt.safetensors")
	f32 := []float32{1, -2.5, float32(math.Inf(1)), 3e-40}
	ts := []WriteTensor{
		{Name: "z", DType: F32, Shape: []int{2, 2}, Data: F32Bytes(f32)},
		{Name: "a.i64", DType: I64, Shape: []int{3}, Data: I64Bytes([]int64{-1, 1 << 40, 7})},
		{Name: "b.i32", DType: I32, Shape: []int{3}, Data: I32Bytes([]int32{-5, 0, 1 << 30})},
		{Name: "c.u8", DType: U8, Shape: []int{1, 3}, Data: U8Bytes([]uint8{0, 200, 255})},
		{Name: "d.bf16", DType: BF16, Shape: []int{2}, Data: BF16Bytes([]float32{1.5, -0.0078125})},
		{Name: "e.empty", DType: F32, Shape: []int{0, 4}, Data: nil},
		{Name: "f.scalar", DType: F64, Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.25))},
		{Name: "g.bool", DType: BOOL, Shape: []int{2}, Data: []byte{1, 0}},
		{Name: "h.i8", DType: I8, Shape: []int{2}, Data: []byte{0xff, 0x7f}},
		{Name: "i.e4m3", DType: F8E4M3, Shape: []int{2}, Data: []byte{0x38, 0xfe}},
		{Name: "j.e8m0", DType: F8E8M0, Shape: []int{2}, Data: []byte{127, 130}},
		{Name: "k.f16", DType: F16, Shape: []int{1}, Data: []byte{0x00, 0x3c}},
		{Name: "l.i16", DType: I16, Shape: []int{1}, Data: []byte{0xfe, 0xff}},
	}
	md := map[string]string{"format": "pt", "x": "y"}
	if err := WriteFile(p, ts, md); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temp files left: %v", ents)
	}
	raw, _ := os.ReadFile(p)
	hl := binary.LittleEndian.Uint64(raw)
	if hl%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", hl)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !reflect.DeepEqual(f.Metadata, md) {
		t.Errorf("metadata %v", f.Metadata)
	}
	// Data is laid out in name order.
	var last int64 = -1
	for _, n := range f.Names() {
		tn, _ := f.Get(n)
		if tn.Offset < last {
			t.Errorf("%s not in name order", n)
		}
		last = tn.Offset
	}
	for _, w := range ts {
		tn, ok := f.Get(w.Name)
		if !ok {
			t.Fatalf("%s missing", w.Name)
		}
		if tn.DType != w.DType || !reflect.DeepEqual(tn.Shape, w.Shape) || !bytes.Equal(tn.Data, w.Data) {
			t.Errorf("%s: got %s %v %x", w.Name, tn.DType, tn.Shape, tn.Data)
		}
	}
	check := func(name string, want []float32) {
		t.Helper()
		tn, _ := f.Get(name)
		got, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s.Float32s() = %v, want %v", name, got, want)
		}
	}
	check("z", f32)
	check("a.i64", []float32{-1, 1 << 40, 7})
	check("b.i32", []float32{-5, 0, 1 << 30})
	check("c.u8", []float32{0, 200, 255})
	check("d.bf16", []float32{1.5, -0.0078125})
	check("e.empty", []float32{})
	check("f.scalar", []float32{0.25})
	check("g.bool", []float32{1, 0})
	check("h.i8", []float32{-1, 127})
	check("i.e4m3", []float32{1, -448})
	check("j.e8m0", []float32{1, 8})
	check("k.f16", []float32{1})
	check("l.i16", []float32{-2})
	tn, _ := f.Get("a.i64")
	if _, err := tn.Int32s(); err == nil || !strings.Contains(err.Error(), "a.i64") {
		t.Errorf("Int32s out of range: %v", err)
	}
	tn, _ = f.Get("f.scalar")
	if tn.NumElements() != 1 {
		t.Error("scalar NumElements")
	}
	// Encode is deterministic and independent of input order.
	b1, _ := Encode(ts, md)
	rev := append([]WriteTensor(nil), ts...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	b2, _ := Encode(rev, md)
	if !bytes.Equal(b1, b2) || !bytes.Equal(b1, raw) {
		t.Error("Encode not deterministic")
	}
	// Overwrite an existing file.
	if err := WriteFile(p, ts[:1], nil); err != nil {
		t.Fatal(err)
	}
	g, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.Names()) != 1 || g.Metadata != nil {
		t.Errorf("overwrite: %v %v", g.Names(), g.Metadata)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.safetensors")
	cases := map[string][]WriteTensor{
		"unknown dtype": {{Name: "a", DType: "F128", Shape: []int{1}, Data: make([]byte, 16)}},
		"needs":         {{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}},
		"duplicate":     {{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}},
		"negative":      {{Name: "a", DType: U8, Shape: []int{-1}}},
		"invalid":       {{Name: "__metadata__", DType: U8, Shape: []int{1}, Data: []byte{1}}},
	}
	for want, ts := range cases {
		err := WriteFile(p, ts, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
	if err := WriteFile(filepath.Join(dir, "nodir", "x.safetensors"), nil, nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left behind: %v", ents)
	}
}

// build makes a file from a header string (not padded) and data bytes.
func build(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, data...)
}

func withLen(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

func TestStrictErrors(t *testing.T) {
	const goodHdr = `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	cases := []struct {
		name   string
		file   []byte
		tensor string // expected tensor name in the message ("" = none)
		want   string // expected substring
		offset bool   // message carries a byte offset
	}{
		{"short", []byte{1, 0, 0}, "", "shorter than the 8-byte", false},
		{"hlen small", withLen(1, "{}"), "", "header length 1 is too small", true},
		{"hlen huge", withLen(MaxHeaderLen+1, "{}"), "", "exceeds the 104857600 byte limit", true},
		{"hlen beyond file", withLen(100, "{}"), "", "exceeds the file size", true},
		{"not object", build(`[1,2]`, nil), "", "not a JSON object", true},
		{"bad json", build(`{"a":{"dtype":"F32",`, nil), "", "invalid JSON header", true},
		{"trailing junk json", build(`{} x`, nil), "", "invalid JSON header", true},
		{"bad metadata", build(`{"__metadata__":{"a":1}}`, nil), "", "__metadata__", false},
		{"bad entry", build(`{"t1":{"dtype":3,"shape":[1],"data_offsets":[0,1]}}`, []byte{0}), "t1", "invalid tensor entry", false},
		{"missing field", build(`{"t1":{"dtype":"U8","shape":[1]}}`, []byte{0}), "t1", "needs dtype, shape and data_offsets", false},
		{"unknown dtype", build(`{"t1":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), "t1", `unknown dtype "F4"`, false},
		{"negative shape", build(`{"t1":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, []byte{0}), "t1", "negative dimension", false},
		{"shape overflow", build(`{"t1":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, []byte{0}), "t1", "overflows", false},
		{"offsets len", build(`{"t1":{"dtype":"U8","shape":[1],"data_offsets":[0]}}`, []byte{0}), "t1", "data_offsets must have 2", false},
		{"offsets reversed", build(`{"t1":{"dtype":"U8","shape":[1],"data_offsets":[2,1]}}`, []byte{0, 0}), "t1", "invalid data_offsets [2, 1]", false},
		{"offsets negative", build(`{"t1":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, []byte{0}), "t1", "invalid data_offsets", false},
		{"size mismatch", build(`{"t1":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), "t1", "needs 8 bytes but data_offsets [0, 4] span 4", true},
		{"beyond data", build(`{"t1":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4)), "t1", "end beyond the data area of 4 bytes", true},
		{"overlap", build(`{"t1":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t2":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "t2", `overlaps tensor "t1"`, true},
		{"gap", build(`{"t1":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t2":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)), "t2", "gap of 4 bytes", true},
		{"gap at start", build(`{"t1":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "t1", "gap of 4 bytes", true},
		{"empty name", build(`{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), "", "empty tensor name", false},
		{"trailing", build(goodHdr, make([]byte, 9)), "", "1 trailing bytes", true},
		{"no tensors but data", build(`{}`, make([]byte, 3)), "", "3 trailing bytes", true},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			if err := os.WriteFile(p, c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(p)
			if err == nil {
				f.Close()
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, p) {
				t.Errorf("message does not name the file: %s", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not contain %q", msg, c.want)
			}
			if c.tensor != "" && !strings.Contains(msg, `tensor "`+c.tensor+`"`) {
				t.Errorf("message does not name tensor %s: %s", c.tensor, msg)
			}
			if c.offset != strings.Contains(msg, "byte offset") {
				t.Errorf("byte offset presence != %v: %s", c.offset, msg)
			}
			var se *Error
			if !asError(err, &se) || se.File != p || se.Tensor != c.tensor {
				t.Errorf("not a *Error with File/Tensor set: %#v", err)
			}
		})
	}
	// Sanity: the good header and a padded header parse.
	if _, err := Parse("good", build(goodHdr, make([]byte, 8))); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("padded", build(goodHdr+"   ", make([]byte, 8))); err != nil {
		t.Fatal(err)
	}
	// Byte offsets are absolute: gap case points at the end of t1's data.
	_, err := Parse("gap", build(`{"t1":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t2":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)))
	var se *Error
	hdrLen := int64(len(`{"t1":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t2":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`))
	if !asError(err, &se) || se.Offset != 8+hdrLen+4 {
		t.Errorf("gap offset = %v, want %d", err, 8+hdrLen+4)
	}
	// Zero-size tensors anywhere are fine.
	if _, err := Parse("zero", build(`{"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"t1":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, make([]byte, 4))); err != nil {
		t.Error(err)
	}
	if _, err := Open(filepath.Join(dir, "does-not-exist")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

func writeST(t *testing.T, path string, ts ...WriteTensor) {
	t.Helper()
	if err := WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

func u8(name string, v ...byte) WriteTensor {
	return WriteTensor{Name: name, DType: U8, Shape: []int{len(v)}, Data: v}
}

func TestOpenDirErrors(t *testing.T) {
	mk := func(t *testing.T, index string, shards map[string][]WriteTensor) string {
		d := t.TempDir()
		if index != "" {
			if err := os.WriteFile(filepath.Join(d, IndexFile), []byte(index), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for n, ts := range shards {
			writeST(t, filepath.Join(d, n), ts...)
		}
		return d
	}
	t.Run("bad json", func(t *testing.T) {
		d := mk(t, `{"weight_map": {`, nil)
		if _, err := OpenDir(d); err == nil || !strings.Contains(err.Error(), "invalid index JSON") || !strings.Contains(err.Error(), IndexFile) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no weight_map", func(t *testing.T) {
		d := mk(t, `{"metadata": {}}`, nil)
		if _, err := OpenDir(d); err == nil || !strings.Contains(err.Error(), "no weight_map") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("missing shard", func(t *testing.T) {
		d := mk(t, `{"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}`,
			map[string][]WriteTensor{"s1.safetensors": {u8("a", 1)}})
		_, err := OpenDir(d)
		if err == nil || !strings.Contains(err.Error(), "s2.safetensors") || !strings.Contains(err.Error(), `"b"`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bad shard name", func(t *testing.T) {
		d := mk(t, `{"weight_map": {"a": "../s1.safetensors"}}`, nil)
		if _, err := OpenDir(d); err == nil || !strings.Contains(err.Error(), "invalid shard name") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("tensor absent from shard", func(t *testing.T) {
		d := mk(t, `{"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}}`,
			map[string][]WriteTensor{"s1.safetensors": {u8("a", 1)}})
		_, err := OpenDir(d)
		if err == nil || !strings.Contains(err.Error(), `tensor "b"`) || !strings.Contains(err.Error(), "s1.safetensors") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("broken shard", func(t *testing.T) {
		d := mk(t, `{"weight_map": {"a": "s1.safetensors"}}`, nil)
		os.WriteFile(filepath.Join(d, "s1.safetensors"), build(`{}`, []byte{1}), 0o644)
		_, err := OpenDir(d)
		if err == nil || !strings.Contains(err.Error(), "s1.safetensors") || !strings.Contains(err.Error(), "trailing") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("extra tensors ok", func(t *testing.T) {
		d := mk(t, `{"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}`,
			map[string][]WriteTensor{"s1.safetensors": {u8("a", 1), u8("x", 2)}, "s2.safetensors": {u8("b", 3)}})
		s, err := OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !reflect.DeepEqual(s.Names(), []string{"a", "b", "x"}) {
			t.Errorf("names %v", s.Names())
		}
		b, _ := s.Get("b")
		if b.Data[0] != 3 || filepath.Base(b.File) != "s2.safetensors" {
			t.Errorf("b = %+v", b)
		}
	})
	t.Run("index decides duplicates", func(t *testing.T) {
		d := mk(t, `{"weight_map": {"a": "s2.safetensors"}}`,
			map[string][]WriteTensor{"s1.safetensors": {u8("a", 1)}, "s2.safetensors": {u8("a", 2)}})
		// s1 is not referenced by the index, so it is not opened.
		s, err := OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		a, _ := s.Get("a")
		if a.Data[0] != 2 {
			t.Error("wrong shard")
		}
	})
	t.Run("single model.safetensors", func(t *testing.T) {
		d := mk(t, "", map[string][]WriteTensor{"model.safetensors": {u8("a", 1)}, "model-extra.safetensors": {u8("a", 2)}})
		s, err := OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if a, _ := s.Get("a"); a.Data[0] != 1 || len(s.Files()) != 1 {
			t.Error("model.safetensors not preferred")
		}
	})
	t.Run("glob", func(t *testing.T) {
		d := mk(t, "", map[string][]WriteTensor{"model-1.safetensors": {u8("a", 1)}, "model-2.safetensors": {u8("b", 2)}, "other.safetensors": {u8("c", 3)}})
		s, err := OpenDir(d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if !reflect.DeepEqual(s.Names(), []string{"a", "b"}) {
			t.Errorf("names %v", s.Names())
		}
	})
	t.Run("glob duplicate", func(t *testing.T) {
		d := mk(t, "", map[string][]WriteTensor{"model-1.safetensors": {u8("a", 1)}, "model-2.safetensors": {u8("a", 2)}})
		if _, err := OpenDir(d); err == nil || !strings.Contains(err.Error(), `tensor "a" is in both`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("empty dir", func(t *testing.T) {
		if _, err := OpenDir(t.TempDir()); err == nil {
			t.Error("no error")
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	good, _ := Encode([]WriteTensor{
		{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 8)},
		{Name: "b", DType: U8, Shape: []int{0}},
	}, map[string]string{"k": "v"})
	f.Add(good)
	f.Add(build(`{}`, nil))
	f.Add(build(`{"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,1]}}`, []byte{0}))
	f.Add(build(`{"t1":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t2":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)))
	f.Add(withLen(1<<63, "{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		// A valid file's tensors lie inside it and re-encode identically
		// modulo layout.
		var ts []WriteTensor
		for _, n := range file.Names() {
			tn, _ := file.Get(n)
			if tn.Offset < 8 || tn.Offset+int64(len(tn.Data)) > int64(len(data)) {
				t.Fatalf("%s outside the file", n)
			}
			ts = append(ts, WriteTensor{Name: n, DType: tn.DType, Shape: tn.Shape, Data: tn.Data})
		}
		enc, err := Encode(ts, file.Metadata)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := Parse("re", enc); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
	})
}
