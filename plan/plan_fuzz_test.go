package plan_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/plan"
)

// FuzzDecode feeds arbitrary bytes to the plan reader, as they are and
// resealed (so that the consistency checks, not only the hash, see them):
// it must not panic, and a plan it accepts encodes to a file that decodes
// to the same header and graphs. The whole-file fuzz that also runs the
// plans is FuzzPlanFile (file_fuzz_test.go).
func FuzzDecode(f *testing.F) {
	good := testPlan(f)
	f.Add(good)
	f.Add(bytes.Replace(good, []byte("DS4PLAN 2"), []byte("DS4PLAN 3"), 1))
	f.Add(bytes.Replace(good, []byte(`"format_version":2`), []byte(`"format_version":7`), 1))
	f.Add(bytes.Replace(good, []byte(`"graphs":["prefill","decode"]`), []byte(`"graphs":["prefill","other"]`), 1))
	f.Add(bytes.Replace(good, []byte("{buf=1}"), []byte("{buf=0}"), 1))
	f.Add([]byte(fmt.Sprintf("%s %d\n{}\n", plan.Magic, plan.Version)))
	f.Add([]byte("DS4PLAN 2\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, reseal(data)} {
			p, err := plan.Decode(d)
			if err != nil {
				continue
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
		}
	})
}
