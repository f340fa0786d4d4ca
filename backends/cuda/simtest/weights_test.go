package simtest

import (
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// TestQuantWeightDownload: an fp8 product weight and an expert stack,
// bound and read back, come back with as many code and scale bytes as
// were bound (the device no longer keeps their host bytes to size them).
func TestQuantWeightDownload(t *testing.T) {
	b, err := backends.Get("cuda")
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fp8 := &backends.HostWeight{Name: "w", DType: ir.F8E4M3, Shape: []int{64, 96}, Format: "fp8", Stored: "F8_E4M3",
		Data: make([]byte, 64*96), Scale: make([]byte, 2*3)}
	part := func() *backends.HostWeight {
		return &backends.HostWeight{Name: "e", DType: ir.FP4E2M1, Shape: []int{8, 64}, Format: "fp4", Stored: "I8",
			Data: make([]byte, 8*32), Scale: make([]byte, 8*2)}
	}
	stack := &backends.HostWeight{Name: "s", DType: ir.FP4E2M1, Shape: []int{3, 8, 64}, Format: "fp4",
		Parts: []*backends.HostWeight{part(), part(), part()}}
	for _, w := range []*backends.HostWeight{fp8, stack} {
		buf, err := d.BindWeight(w)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		got, err := d.Download(buf)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		if len(w.Parts) == 0 {
			if len(got.U8) != len(w.Data) || len(got.Scale) != len(w.Scale) {
				t.Errorf("%s: %d code and %d scale bytes back, bound %d and %d", w.Name, len(got.U8), len(got.Scale), len(w.Data), len(w.Scale))
			}
		} else if len(got.Parts) != len(w.Parts) || len(got.Parts[0].U8) != len(w.Parts[0].Data) || len(got.Parts[0].Scale) != len(w.Parts[0].Scale) {
			t.Errorf("%s: %d experts back, bound %d", w.Name, len(got.Parts), len(w.Parts))
		}
		if err := d.Free(buf); err != nil {
			t.Error(err)
		}
	}
}

// TestFusionOptionRefused: cuda-fusions with a value that is not a boolean
// is refused when the programs are prepared (not read as "off").
func TestFusionOptionRefused(t *testing.T) {
	backends.SetOptions(map[string]string{"cuda-fusions": "flase"})
	defer backends.SetOptions(nil)
	m, path := dstest.ReleasedModule(t, "tiny")
	md, err := engine.Open(m, path, "cuda")
	if err == nil {
		md.Close()
		t.Fatal("cuda-fusions=flase was accepted")
	}
	if !strings.Contains(err.Error(), "cuda-fusions") {
		t.Errorf("error %q does not name the option", err)
	}
}
