package plan_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/plan"
)

// testGraphs is the smallest module Check accepts: the inputs, a window
// state updated once, a probe, buffer slots as assign-buffers gives them,
// and logits f32[B,S,V] with V the rows of embed.weight.
const testGraphs = `module {
  meta "config_fingerprint" = "0123456789abcdef"
}
graph prefill {
  %0 = input {name="tokens"} : i64[B,S]
  %1 = input {name="start_pos"} : i64[]
  %2 = weight {format="f32", name="embed.weight"} : f32[8,4]
  %3 = embed(%2, %0) {buf=0} : f32[B,S,4]
  %4 = relu(%3) {buf=1} : f32[B,S,4]
  %5 = state {kind="window", name="w"} : f32[B,8,4]
  %6 = window_update(%5, %4, %1) : f32[B,8,4]
  %7 = probe(%4) {name="x"} : f32[B,S,4]
  %8 = matmul(%7, %2) : f32[B,S,8]
  output logits = %8
}
graph decode {
  %0 = input {name="tokens"} : i64[B,1]
  %1 = input {name="start_pos"} : i64[]
  %2 = weight {format="f32", name="embed.weight"} : f32[8,4]
  %3 = embed(%2, %0) {buf=0} : f32[B,1,4]
  %4 = relu(%3) {buf=1} : f32[B,1,4]
  %5 = state {kind="window", name="w"} : f32[B,8,4]
  %6 = window_update(%5, %4, %1) : f32[B,8,4]
  %7 = probe(%4) {name="x"} : f32[B,1,4]
  %8 = matmul(%7, %2) : f32[B,1,8]
  output logits = %8
}
`

func testPlan(t testing.TB) []byte {
	t.Helper()
	m, err := ir.Parse(testGraphs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.Encode(&plan.Plan{Header: plan.Header{Model: "deepseek-v4.1", ConfigFingerprint: "0123456789abcdef", Backend: "cpu"}, Module: m})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reseal rewrites the first line with the hash of the rest, as a user who
// read docs/plan-format.md could: what the consistency checks must catch.
func reseal(b []byte) []byte {
	_, rest, _ := bytes.Cut(b, []byte("\n"))
	return append([]byte(plan.FirstLine(rest)), rest...)
}

// edit replaces old by new in the graph text of both graphs (n = -1) or the
// first occurrence (n = 1).
func edit(b []byte, old, new string, n int) []byte {
	return bytes.Replace(b, []byte(old), []byte(new), n)
}

func TestDecodeGood(t *testing.T) {
	b := testPlan(t)
	if !bytes.HasPrefix(b, []byte("DS4PLAN 2 sha256:")) {
		t.Fatalf("first line: %q", b[:40])
	}
	p, err := plan.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.ConfigFingerprint != "0123456789abcdef" || len(p.Module.Graphs) != 2 {
		t.Fatalf("decoded %+v", p.Header)
	}
}

// TestDecodeRefuses: every edit is refused twice, once by the content hash
// (stale) and once, resealed, by the check that names what is wrong.
func TestDecodeRefuses(t *testing.T) {
	good := testPlan(t)
	swap := func(b []byte, a, c string) []byte {
		b = edit(b, a, "\x00", 1)
		b = edit(b, c, a, 1)
		return edit(b, "\x00", c, 1)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"swapped lines", swap(good, `  %6 = window_update(%5, %4, %1) : f32[B,8,4]`, `  %7 = probe(%4) {name="x"} : f32[B,S,4]`), "node 6 of the schedule is %7 (probe): IDs must count 0, 1, 2"},
		{"buffer shared while live", edit(good, "relu(%3) {buf=1}", "relu(%3) {buf=0}", 1), "%4 (relu): takes buffer slot 0 while %3 (embed) in it is still read by %4 (relu)"},
		{"buffer missing", edit(good, "relu(%3) {buf=1}", "relu(%3)", 1), "%4 (relu): has no buffer slot"},
		{"buffer out of range", edit(good, "relu(%3) {buf=1}", "relu(%3) {buf=1000000000}", 1), "buffer slot buf=1000000000 out of range [0,9)"},
		{"buffer on a view", edit(good, `probe(%4) {name="x"}`, `probe(%4) {buf=2, name="x"}`, 1), "%7 (probe): has buffer slot buf=2 but writes no new storage"},
		{"buffer on the output", edit(good, "matmul(%7, %2) :", "matmul(%7, %2) {buf=2} :", 1), "%8 (matmul): is a graph output but has buffer slot buf=2"},
		{"output repointed", edit(good, "output logits = %8", "output logits = %4", 1), "%8 (matmul): its value is never used"},
		{"no logits", edit(good, "output logits = %8", "output y = %8", 1), `graph prefill: outputs ["y"], want exactly one, logits`},
		{"logits of another type", edit(good, "%8 = matmul(%7, %2) : f32[B,S,8]\n  output logits = %8", "%8 = matmul(%7, %2) {buf=2} : f32[B,S,8]\n  %9 = cast(%8) {to=\"bf16\"} : bf16[B,S,8]\n  output logits = %9", 1), "output logits is %9 (cast) of type bf16[B,S,8], want f32[B,S,V]"},
		{"unknown input", edit(good, `input {name="start_pos"}`, `input {name="start"}`, 1), `%1 (input): unknown input "start"`},
		{"state differs", edit(good, `state {kind="window", name="w"} : f32[B,8,4]
  %6 = window_update(%5, %4, %1) : f32[B,8,4]`, `state {kind="window", name="w"} : f32[B,9,4]
  %6 = window_update(%5, %4, %1) : f32[B,9,4]`, 1), `prefill and decode declare different states ("w" is window f32[B,9,4] in prefill, window f32[B,8,4] in decode)`},
		{"state never updated", edit(good, "%6 = window_update(%5, %4, %1) : f32[B,8,4]", "%6 = relu(%5) {buf=2} : f32[B,8,4]", 1), "%6 (relu): its value is never used"},
		{"state read after its update", edit(good, "%7 = probe(%4) {name=\"x\"} : f32[B,S,4]\n  %8 = matmul(%7, %2) : f32[B,S,8]", "%7 = probe(%5) {name=\"x\"} : f32[B,8,4]\n  %8 = matmul(%4, %2) : f32[B,S,8]", 1), "argument 0 reads state version %5 after %6 updated it in place"},
		{"duplicate probe", edit(good, "%4 = relu(%3) {buf=1} : f32[B,S,4]", "%4 = probe(%3) {name=\"x\"} : f32[B,S,4]", 1), `name "x" is also the name of %4`},
		{"weight layer", edit(good, `weight {format="f32", name="embed.weight"}`, `weight {format="f32", layer=2, name="embed.weight"}`, 1), `%2 (weight): "embed.weight" has layer=2 but is not a per-layer (layers.N.…) weight`},
		{"weights differ", edit(good, `weight {format="f32", name="embed.weight"} : f32[8,4]
  %3 = embed(%2, %0) {buf=0} : f32[B,1,4]`, `weight {component="x", format="f32", name="embed.weight"} : f32[8,4]
  %3 = embed(%2, %0) {buf=0} : f32[B,1,4]`, 1), `prefill and decode bind different weights ("embed.weight" is {format="f32", name="embed.weight"} : f32[8,4] in prefill, {component="x", format="f32", name="embed.weight"} : f32[8,4] in decode)`},
		{"probes differ", edit(good, `probe(%4) {name="x"} : f32[B,1,4]`, `probe(%4) {name="z"} : f32[B,1,4]`, 1), `prefill and decode have different probes ("x" only in prefill)`},
		{"header graphs", edit(good, `"graphs":["prefill","decode"]`, `"graphs":["prefill"]`, 1), `the header lists graphs ["prefill"], the file holds ["prefill" "decode"]`},
		{"meta disagrees", edit(good, `meta "config_fingerprint" = "0123456789abcdef"`, `meta "config_fingerprint" = "fedcba9876543210"`, 1), `module meta "config_fingerprint" is "fedcba9876543210", the header says "0123456789abcdef"`},
		{"header field type", edit(good, `"format_version":2`, `"format_version":"2"`, 1), `plan header: field "format_version": want an integer, got string`},
		{"header unknown field", edit(good, `"backend":"cpu"`, `"backend":"cpu","max_bach":3`, 1), `plan header: field "max_bach": unknown field (did you mean "max_batch"?)`},
		{"probe renamed", edit(good, `name="x"`, `name="y"`, -1), "content hash mismatch"}, // consistent: only the hash sees it
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if bytes.Equal(c.data, good) {
				t.Fatal("the edit changed nothing")
			}
			if _, err := plan.Decode(c.data); err == nil {
				t.Errorf("stale hash: accepted")
			}
			_, err := plan.Decode(reseal(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				if c.want == "content hash mismatch" && err == nil {
					return // resealed, a consistent edit the hash alone refuses
				}
				t.Errorf("resealed: got %v, want %q", err, c.want)
			}
		})
	}
}

func TestDecodeFirstLine(t *testing.T) {
	good := testPlan(t)
	_, rest, _ := bytes.Cut(good, []byte("\n"))
	for line, want := range map[string]string{
		"DS4PLAN 1":             "plan format version 1, this build reads version 2: recompile the plan",
		"DS4PLAN 2":             `want DS4PLAN 2 sha256: and 64 hex digits`,
		"DS4PLAN 2 sha256:abc":  `want DS4PLAN 2 sha256: and 64 hex digits`,
		"DS4PLAN 2 md5:" + "00": `want DS4PLAN 2 sha256: and 64 hex digits`,
		"DS4PLAN two":           "not a plan file",
		"hello":                 "not a plan file",
		plan.FirstLine([]byte("x"))[:len(plan.FirstLine(nil))-1]: "content hash mismatch: the plan was edited or damaged; recompile it",
	} {
		_, err := plan.Decode(append([]byte(line+"\n"), rest...))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", line, err, want)
		}
	}
}

// TestEncodeRefuses: compile cannot write a plan the reader would refuse.
func TestEncodeRefuses(t *testing.T) {
	m, err := ir.Parse(strings.Replace(testGraphs, "relu(%3) {buf=1}", "relu(%3) {buf=0}", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Encode(&plan.Plan{Header: plan.Header{ConfigFingerprint: "0123456789abcdef"}, Module: m}); err == nil || !strings.Contains(err.Error(), "takes buffer slot 0") {
		t.Fatalf("Encode: %v", err)
	}
}
