package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/internal/numfmt"
)

// WriteTensor is one tensor to write.
type WriteTensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// Encode returns the bytes of a safetensors file holding ts (sorted by name)
// and metadata (may be nil).
func Encode(ts []WriteTensor, metadata map[string]string) ([]byte, error) {
	sorted := append([]WriteTensor(nil), ts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var h strings.Builder
	h.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		mb, err := json.Marshal(metadata) // map keys are sorted
		if err != nil {
			return nil, fmt.Errorf("safetensors: metadata: %w", err)
		}
		h.WriteString(`"__metadata__":`)
		h.Write(mb)
		first = false
	}
	var off int64
	for i, t := range sorted {
		if t.Name == "" || t.Name == "__metadata__" {
			return nil, fmt.Errorf("safetensors: invalid tensor name %q", t.Name)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, fmt.Errorf("safetensors: duplicate tensor %q", t.Name)
		}
		es, ok := dtypeSizes[t.DType]
		if !ok {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		n := int64(es)
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
			n *= int64(d)
		}
		if n != int64(len(t.Data)) {
			return nil, fmt.Errorf("safetensors: tensor %q: %s%v needs %d bytes, have %d", t.Name, t.DType, t.Shape, n, len(t.Data))
		}
		if !first {
			h.WriteByte(',')
		}
		first = false
		nb, _ := json.Marshal(t.Name)
		h.Write(nb)
		h.WriteString(`:{"dtype":"`)
		h.WriteString(t.DType)
		h.WriteString(`","shape":[`)
		for k, d := range t.Shape {
			if k > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, off+n)
		off += n
	}
	h.WriteByte('}')
	hdr := h.String()
	if pad := (8 - len(hdr)%8) % 8; pad > 0 {
		hdr += strings.Repeat(" ", pad)
	}
	out := make([]byte, 8, 8+int64(len(hdr))+off)
	binary.LittleEndian.PutUint64(out, uint64(len(hdr)))
	out = append(out, hdr...)
	for _, t := range sorted {
		out = append(out, t.Data...)
	}
	return out, nil
}

// WriteFile writes ts and metadata to path through fileio.WriteFile: a
// regular file is replaced atomically, a device written in place; errors
// name path ("out.safetensors: is a directory").
func WriteFile(path string, ts []WriteTensor, metadata map[string]string) error {
	b, err := Encode(ts, metadata)
	if err != nil {
		return err
	}
	return fileio.WriteFile(path, b)
}

// F32Bytes returns the little-endian bytes of x (dtype F32).
func F32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// BF16Bytes rounds x to bfloat16 (nearest even) and returns the
// little-endian bytes (dtype BF16).
func BF16Bytes(x []float32) []byte {
	b := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], numfmt.BF16Bits(v))
	}
	return b
}

// I32Bytes returns the little-endian bytes of x (dtype I32).
func I32Bytes(x []int32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// I64Bytes returns the little-endian bytes of x (dtype I64).
func I64Bytes(x []int64) []byte {
	b := make([]byte, 8*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

// U8Bytes returns a copy of x (dtype U8, BOOL, F8_E4M3 or F8_E8M0 codes).
func U8Bytes(x []uint8) []byte { return append([]byte(nil), x...) }
