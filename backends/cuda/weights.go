package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
)

// LayoutKind is how a weight is stored on the GPU. The backend chooses it
// from the weight's format and shape (BindWeight): the
// products read bf16 matrices as stored (half the bytes of fp32) and fp8/fp4
// codes with their e8m0 scales (dequantised inside the kernels), the other
// ops read fp32 values.
type LayoutKind int

// The weight layouts.
const (
	LayoutF32       LayoutKind = iota // fp32 values
	LayoutBF16                        // bf16 bits, 2 bytes a value (matmul, grouped_matmul, embed)
	LayoutQuant                       // e4m3 codes or packed e2m1 pairs in Ptr, e8m0 scales in Scale
	LayoutStoredFP8                   // an fp8 matrix read as bf16(e4m3·e8m0) by the plain products (wo_a)
	LayoutRouted                      // an expert stack: Routed
	LayoutI64                         // int64 values (the Engram token map)
)

// Layout is a weight's storage on the GPU.
type Layout struct {
	Kind   LayoutKind
	Scale  driver.Ptr // e8m0 scales of LayoutQuant and LayoutStoredFP8
	Routed *Routed
	Bytes  int64 // device bytes (codes, scales, values)

	src     *backends.HostWeight // a bf16 or stored-fp8 matrix's host bytes, for values (nil for other layouts)
	codes   int                  // bytes of codes (LayoutQuant, LayoutStoredFP8), as downloaded
	scales  int                  // bytes of e8m0 scales (LayoutQuant, LayoutStoredFP8)
	widened driver.Ptr           // fp32 values of a bf16 or fp8 matrix, made at a first non-product use
	host    *driver.HostBuffer   // an Engram table kept in host memory (Bytes 0: none on the GPU)
}

// hostWeight is a weight's bytes in the chosen GPU layout, to upload.
type hostWeight struct {
	kind   LayoutKind
	data   []byte // what goes to Ptr
	scale  []byte
	host   []int64
	routed *Routed // strides and kind (pointers filled after upload)
	parts  []*backends.HostWeight
}

// layoutOf chooses the GPU layout of checkpoint weight w with the given
// use and returns the bytes to upload (the stored bytes themselves where
// the kernels read them as stored).
func layoutOf(w *backends.HostWeight, use string) (*hostWeight, error) {
	switch {
	case len(w.Parts) > 0:
		p0 := w.Parts[0]
		for i, p := range w.Parts {
			if len(p.Data) != len(p0.Data) || len(p.Scale) != len(p0.Scale) || p.DType != p0.DType {
				return nil, fmt.Errorf("weight %q: expert %d is stored unlike expert 0", w.Name, i)
			}
		}
		if p0.DType != ir.FP4E2M1 && p0.DType != ir.F8E4M3 {
			return nil, fmt.Errorf("weight %q: experts of dtype %s have no GPU kernel", w.Name, p0.DType)
		}
		r := &Routed{FP4: p0.DType == ir.FP4E2M1, WStride: len(p0.Data), ScaleStride: len(p0.Scale), Experts: len(w.Parts)}
		return &hostWeight{kind: LayoutRouted, routed: r, parts: w.Parts}, nil
	case w.DType == ir.F8E4M3 || w.DType == ir.FP4E2M1:
		return &hostWeight{kind: LayoutQuant, data: w.Data, scale: w.Scale}, nil
	case w.DType == ir.I64:
		if len(w.Data)%8 != 0 {
			return nil, fmt.Errorf("weight %q: %d bytes of int64", w.Name, len(w.Data))
		}
		hw := &hostWeight{kind: LayoutI64, data: w.Data}
		if len(w.Data) <= 8<<22 { // the token map: kept for constant ids (the pad id)
			hw.host = make([]int64, len(w.Data)/8)
			for i := range hw.host {
				hw.host[i] = int64(binary.LittleEndian.Uint64(w.Data[8*i:]))
			}
		}
		return hw, nil
	case !w.DType.IsFloat():
		return nil, fmt.Errorf("weight %q: dtype %s has no GPU layout", w.Name, w.DType)
	}
	if w.Stored == "F8_E4M3" {
		if w.Format == "fp8" && use == "plain" && len(w.Shape) == 2 {
			return &hostWeight{kind: LayoutStoredFP8, data: w.Data, scale: w.Scale}, nil
		}
		v, err := widenFP8(w)
		if err != nil {
			return nil, err
		}
		return &hostWeight{kind: LayoutF32, data: asBytes(v)}, nil
	}
	if use == "plain" && w.Format == "bf16" && w.Stored == "BF16" {
		return &hostWeight{kind: LayoutBF16, data: w.Data}, nil
	}
	v, err := floats(w)
	if err != nil {
		return nil, err
	}
	if w.DType == ir.BF16 {
		numfmt.BF16RoundSlice(v)
	}
	if use == "plain" && w.Format == "bf16" && w.DType == ir.BF16 { // v is rounded: its bf16 bytes are exact
		return &hostWeight{kind: LayoutBF16, data: safetensors.BF16Bytes(v)}, nil
	}
	return &hostWeight{kind: LayoutF32, data: asBytes(v)}, nil
}

// floats decodes a float weight stored as BF16, F16 or F32.
func floats(w *backends.HostWeight) ([]float32, error) {
	var size int
	var dec func(b []byte) float32
	switch w.Stored {
	case "BF16":
		size, dec = 2, func(b []byte) float32 { return numfmt.BF16FromBits(binary.LittleEndian.Uint16(b)) }
	case "F16":
		size, dec = 2, func(b []byte) float32 { return numfmt.F16ToF32(binary.LittleEndian.Uint16(b)) }
	case "F32":
		size, dec = 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
	default:
		return nil, fmt.Errorf("weight %q: stored as %s, not a float", w.Name, w.Stored)
	}
	if len(w.Data)%size != 0 {
		return nil, fmt.Errorf("weight %q: %d bytes of %s", w.Name, len(w.Data), w.Stored)
	}
	v := make([]float32, len(w.Data)/size)
	for i := range v {
		v[i] = dec(w.Data[size*i:])
	}
	return v, nil
}

// widenFP8 is the engine's bf16(e4m3·e8m0) of an fp8 matrix read as floats:
// 32×32 scale blocks (fp8) or one scale per row and 32 columns (fp8row).
func widenFP8(w *backends.HostWeight) ([]float32, error) {
	if len(w.Shape) != 2 {
		return nil, fmt.Errorf("weight %q: fp8 floats of shape %v", w.Name, w.Shape)
	}
	rows, cols := w.Shape[0], w.Shape[1]
	kb := (cols + 31) / 32
	out := make([]float32, rows*cols)
	for o := range rows {
		sr := (o / 32) * kb
		if w.Format == "fp8row" {
			sr = o * kb
		}
		for i := range cols {
			s := numfmt.E8M0ToF32(w.Scale[sr+i/32])
			out[o*cols+i] = numfmt.BF16Round(numfmt.E4M3ToF32(w.Data[o*cols+i]) * s)
		}
	}
	return out, nil
}

// deviceBytes is what the weight takes on the GPU.
func (hw *hostWeight) deviceBytes() int64 {
	if hw.kind == LayoutRouted {
		return int64(hw.routed.Experts) * int64(hw.routed.WStride+hw.routed.ScaleStride)
	}
	return int64(len(hw.data) + len(hw.scale))
}

// upload allocates the weight on g and copies its bytes (on the stream).
func (g *GPU) uploadWeight(w *backends.HostWeight, hw *hostWeight) (*Value, error) {
	name := w.Name
	v := &Value{DType: w.DType, Shape: append([]int(nil), w.Shape...), Host: hw.host, W: &Layout{Kind: hw.kind, Bytes: hw.deviceBytes()}}
	put := func(b []byte, what string) (driver.Ptr, error) {
		p, err := g.alloc(int64(len(b)), what)
		if err != nil {
			return 0, err
		}
		return p, g.st.Upload(p, b, what)
	}
	var err error
	switch hw.kind {
	case LayoutRouted:
		r := *hw.routed
		wp, err := g.alloc(int64(r.Experts*r.WStride), name)
		if err != nil {
			return nil, err
		}
		sc, err := g.alloc(int64(r.Experts*r.ScaleStride), name+" scales")
		if err != nil {
			return nil, err
		}
		r.W, r.Scale = wp, sc
		for e, p := range hw.parts {
			if err := g.st.Upload(wp+driver.Ptr(e*r.WStride), p.Data, fmt.Sprintf("%s expert %d", name, e)); err != nil {
				return nil, err
			}
			if err := g.st.Upload(sc+driver.Ptr(e*r.ScaleStride), p.Scale, fmt.Sprintf("%s expert %d scales", name, e)); err != nil {
				return nil, err
			}
		}
		v.Ptr, v.W.Routed = wp, &r
		return v, nil
	case LayoutQuant, LayoutStoredFP8:
		var p, s driver.Ptr
		if p, err = put(hw.data, name); err != nil {
			return nil, err
		}
		if s, err = put(hw.scale, name+" scales"); err != nil {
			return nil, err
		}
		v.Ptr, v.W.Scale = p, s
		return v, nil
	}
	p, err := put(hw.data, name)
	if err != nil {
		return nil, err
	}
	v.Ptr = p
	return v, nil
}

// widenBF16 decodes little-endian bf16 bits.
func widenBF16(b []byte) []float32 {
	out := make([]float32, len(b)/2)
	for i := range out {
		out[i] = numfmt.BF16FromBits(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}
