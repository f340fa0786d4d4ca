package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/ds4go/ds4/internal/fileio"
)

// Data type names as written in safetensors headers.
const (
	F32    = "F32"
	F64    = "F64"
	BF16   = "BF16"
	F16    = "F16"
	F8E4M3 = "F8_E4M3"
	F8E8M0 = "F8_E8M0"
	I8     = "I8"
	U8     = "U8"
	I16    = "I16"
	I32    = "I32"
	I64    = "I64"
	BOOL   = "BOOL"
)

var dtypeSizes = map[string]int{
	F32: 4, F64: 8, BF16: 2, F16: 2, F8E4M3: 1, F8E8M0: 1,
	I8: 1, U8: 1, I16: 2, I32: 4, I64: 8, BOOL: 1,
}

// DTypeSize returns the size in bytes of one element of dtype, and whether
// the dtype is known.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// MaxHeaderLen is the largest accepted JSON header (100 MB).
const MaxHeaderLen = 100 << 20

// Error is returned for malformed files. File is always set; Tensor and
// Offset (absolute byte offset in the file, -1 if not applicable) when
// relevant.
type Error struct {
	File   string
	Tensor string
	Offset int64
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	b.WriteString(e.File)
	if e.Tensor != "" {
		fmt.Fprintf(&b, ": tensor %q", e.Tensor)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " (byte offset %d)", e.Offset)
	}
	return b.String()
}

func errf(file, tensor string, off int64, format string, args ...any) error {
	return &Error{File: file, Tensor: tensor, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// Tensor is one tensor of a file. Data aliases the file's mapping.
type Tensor struct {
	Name   string
	DType  string
	Shape  []int
	Data   []byte
	File   string // path of the file holding the tensor
	Offset int64  // absolute byte offset of Data in File
}

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an opened (memory-mapped or in-memory) safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	tensors  map[string]*Tensor
	names    []string
	mapped   []byte // non-nil if mmapped by Open
}

// Get returns the named tensor.
func (f *File) Get(name string) (*Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Names returns the tensor names, sorted.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Close unmaps the file; tensors' Data must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.mapped == nil {
		return nil
	}
	m := f.mapped
	f.mapped = nil
	if err := unmapFile(m); err != nil {
		return fmt.Errorf("safetensors: %s: munmap: %w", f.Path, err)
	}
	return nil
}

// Open memory-maps and validates the safetensors file at path.
func Open(path string) (*File, error) {
	fd, st, err := fileio.Open(path) // a regular file: a directory or FIFO is refused, without blocking
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer fd.Close()
	size := st.Size()
	if size < 8 {
		return nil, errf(path, "", -1, "file is %d bytes, shorter than the 8-byte header length", size)
	}
	if size > math.MaxInt {
		return nil, errf(path, "", -1, "file too large (%d bytes)", size)
	}
	m, err := mapFile(int(fd.Fd()), int(size))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: mmap: %w", path, err)
	}
	f, err := Parse(path, m)
	if err != nil {
		unmapFile(m)
		return nil, err
	}
	f.mapped = m
	return f, nil
}

type rawInfo struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// Parse validates the complete contents of a safetensors file held in data
// (name is used in error messages). The returned tensors alias data.
func Parse(name string, data []byte) (*File, error) {
	size := int64(len(data))
	if size < 8 {
		return nil, errf(name, "", -1, "file is %d bytes, shorter than the 8-byte header length", size)
	}
	var hl uint64
	for i := 7; i >= 0; i-- {
		hl = hl<<8 | uint64(data[i])
	}
	if hl < 2 {
		return nil, errf(name, "", 0, "header length %d is too small", hl)
	}
	if hl > MaxHeaderLen {
		return nil, errf(name, "", 0, "header length %d exceeds the %d byte limit", hl, MaxHeaderLen)
	}
	if int64(hl) > size-8 {
		return nil, errf(name, "", 0, "header length %d exceeds the file size %d", hl, size)
	}
	hdr := data[8 : 8+hl]
	dataStart := 8 + int64(hl)
	dataLen := size - dataStart
	trimmed := bytes.TrimLeft(hdr, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errf(name, "", 8, "header is not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		off := int64(8)
		if se, ok := err.(*json.SyntaxError); ok {
			off += se.Offset
		}
		return nil, errf(name, "", off, "invalid JSON header: %v", err)
	}
	f := &File{Path: name, tensors: make(map[string]*Tensor, len(raw))}
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(raw))
	for tn, msg := range raw {
		if tn == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, errf(name, "", -1, "__metadata__ is not a map of strings: %v", err)
			}
			continue
		}
		if tn == "" {
			return nil, errf(name, "", -1, "empty tensor name")
		}
		var ri rawInfo
		if err := json.Unmarshal(msg, &ri); err != nil {
			return nil, errf(name, tn, -1, "invalid tensor entry: %v", err)
		}
		if ri.DType == nil || ri.Shape == nil || ri.DataOffsets == nil {
			return nil, errf(name, tn, -1, "tensor entry needs dtype, shape and data_offsets")
		}
		es, ok := dtypeSizes[*ri.DType]
		if !ok {
			return nil, errf(name, tn, -1, "unknown dtype %q", *ri.DType)
		}
		shape := make([]int, len(*ri.Shape))
		numel := int64(1)
		for i, d := range *ri.Shape {
			if d < 0 {
				return nil, errf(name, tn, -1, "negative dimension %d in shape %v", d, *ri.Shape)
			}
			if d != 0 && numel > math.MaxInt64/d {
				return nil, errf(name, tn, -1, "shape %v overflows", *ri.Shape)
			}
			numel *= d
			shape[i] = int(d)
		}
		if numel > math.MaxInt64/int64(es) {
			return nil, errf(name, tn, -1, "shape %v overflows", *ri.Shape)
		}
		nbytes := numel * int64(es)
		offs := *ri.DataOffsets
		if len(offs) != 2 {
			return nil, errf(name, tn, -1, "data_offsets must have 2 elements, has %d", len(offs))
		}
		b, e := offs[0], offs[1]
		if b < 0 || e < b {
			return nil, errf(name, tn, -1, "invalid data_offsets [%d, %d]", b, e)
		}
		if e > dataLen {
			return nil, errf(name, tn, dataStart+e, "data_offsets [%d, %d] end beyond the data area of %d bytes", b, e, dataLen)
		}
		if e-b != nbytes {
			return nil, errf(name, tn, dataStart+b, "%s%v needs %d bytes but data_offsets [%d, %d] span %d", *ri.DType, *ri.Shape, nbytes, b, e, e-b)
		}
		f.tensors[tn] = &Tensor{
			Name: tn, DType: *ri.DType, Shape: shape,
			Data: data[dataStart+b : dataStart+e : dataStart+e],
			File: name, Offset: dataStart + b,
		}
		spans = append(spans, span{tn, b, e})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		if spans[i].end != spans[j].end {
			return spans[i].end < spans[j].end
		}
		return spans[i].name < spans[j].name
	})
	var pos int64
	prev := ""
	for _, s := range spans {
		if s.begin < pos {
			return nil, errf(name, s.name, dataStart+s.begin, "data [%d, %d] overlaps tensor %q", s.begin, s.end, prev)
		}
		if s.begin > pos {
			return nil, errf(name, s.name, dataStart+pos, "gap of %d bytes in the data area before this tensor", s.begin-pos)
		}
		pos = s.end
		prev = s.name
	}
	if pos != dataLen {
		return nil, errf(name, "", dataStart+pos, "%d trailing bytes after the last tensor", dataLen-pos)
	}
	f.names = make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		f.names = append(f.names, n)
	}
	sort.Strings(f.names)
	return f, nil
}
