package plan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/plan"
)

const fuzzGraph = `graph prefill {
  %0 = input {name="x"} : f32[B,S,4]
  %1 = relu(%0) : f32[B,S,4]
  output y = %1
}
graph decode {
  %0 = input {name="x"} : f32[B,1,4]
  output y = %0
}
`

// FuzzDecode feeds arbitrary bytes to the plan reader: it must not panic, and
// a plan it accepts encodes to a file that decodes to the same header and
// graphs.
func FuzzDecode(f *testing.F) {
	m, err := ir.Parse(fuzzGraph)
	if err != nil {
		f.Fatal(err)
	}
	good, err := plan.Encode(&plan.Plan{Header: plan.Header{Model: "deepseek-v4.1", ConfigFingerprint: "0123456789abcdef", Backend: "cpu", Config: json.RawMessage(`{"dim":4}`)}, Module: m})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte("DS4PLAN 1"), []byte("DS4PLAN 2"), 1))
	f.Add(bytes.Replace(good, []byte(`"format_version":1`), []byte(`"format_version":7`), 1))
	f.Add(bytes.Replace(good, []byte(`"graphs":["prefill","decode"]`), []byte(`"graphs":["prefill","other"]`), 1))
	f.Add([]byte(fmt.Sprintf("%s %d\n{}\n", plan.Magic, plan.Version)))
	f.Add([]byte("DS4PLAN 1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := plan.Decode(data)
		if err != nil {
			return
		}
		enc, err := plan.Encode(p)
		if err != nil {
			t.Fatalf("accepted plan does not encode: %v", err)
		}
		q, err := plan.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded plan does not decode: %v", err)
		}
		if a, b := ir.Format(p.Module), ir.Format(q.Module); a != b {
			t.Fatalf("graphs changed on re-encoding")
		}
		if p.ConfigFingerprint != q.ConfigFingerprint || p.ModelDir != q.ModelDir || p.Backend != q.Backend {
			t.Fatalf("header changed on re-encoding: %+v vs %+v", p.Header, q.Header)
		}
	})
}
