package tests

// Catalogue entries of docs/errors.md, "exec: edited plans": plans changed
// after compile (the edits of issue 11 that used to run with wrong answers
// or end in an internal error) and trace files of the wrong shape. Most
// edits are resealed first (the content hash recomputed, as docs/plan-format.md
// lets anyone do) so that the consistency check, not the hash, must refuse
// them; one entry is the hash itself.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
)

// planReseal recomputes the content hash of the first line.
func planReseal(b []byte) []byte {
	_, rest, _ := bytes.Cut(b, []byte("\n"))
	sum := sha256.Sum256(rest)
	return append([]byte("DS4PLAN 2 sha256:"+hex.EncodeToString(sum[:])+"\n"), rest...)
}

// planEdit writes the good plan with edit applied to its lines (resealed
// unless stale) and returns exec's arguments for it.
func planEdit(stale bool, edit func(t *testing.T, lines []string) []string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		b, err := os.ReadFile(fx.goodPlan)
		if err != nil {
			t.Fatal(err)
		}
		out := []byte(strings.Join(edit(t, strings.SplitAfter(string(b), "\n")), ""))
		if bytes.Equal(out, b) {
			t.Fatal("the edit changed nothing")
		}
		if !stale {
			out = planReseal(out)
		}
		p := filepath.Join(in, "edited.plan")
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"-plan", p, "-model", fx.goodDir, "-prompt-ids", "1,2,3;4,5,6", "-max-new-tokens", "3"}
	}
}

// planLine returns the index of the first line starting with prefix.
func planLine(t *testing.T, lines []string, prefix string) int {
	t.Helper()
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	t.Fatalf("the good plan has no line %q", prefix)
	return -1
}

// planReplace replaces old by new in every line starting with prefix (both
// graphs hold most nodes).
func planReplace(prefix, old, new string) func(t *testing.T, lines []string) []string {
	return func(t *testing.T, lines []string) []string {
		planLine(t, lines, prefix)
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				if !strings.Contains(l, old) {
					t.Fatalf("line %q holds no %q", l, old)
				}
				lines[i] = strings.Replace(l, old, new, 1)
			}
		}
		return lines
	}
}

// planTrace writes a copy of the tiny golden file with one tensor reshaped
// (its data kept or dropped) and returns exec's arguments for it.
func planTrace(name string, shape []int) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		f, err := safetensors.Open(filepath.Join(tinyDir(), "golden.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var ts []safetensors.WriteTensor
		for _, n := range f.Names() {
			x, _ := f.Get(n)
			w := safetensors.WriteTensor{Name: n, DType: x.DType, Shape: append([]int(nil), x.Shape...), Data: append([]byte(nil), x.Data...)}
			if n == name {
				w.Shape = shape
				if numel(shape) == 0 {
					w.Data = nil
				}
			}
			ts = append(ts, w)
		}
		p := filepath.Join(in, "trace.safetensors")
		if err := safetensors.WriteFile(p, ts, f.Metadata); err != nil {
			t.Fatal(err)
		}
		return []string{"-plan", fx.goodPlan, "-model", fx.goodDir, "-trace-in", p}
	}
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func init() {
	errsCases = append(errsCases, []errsCase{
		{name: "plan-content-hash", cmd: "exec", want: "content hash mismatch: the plan was edited or damaged; recompile it",
			// A consistent edit (an epsilon) that only the hash can see.
			setup: planEdit(true, planReplace("  %29 = rmsnorm", "eps=1e-20", "eps=1e-10"))},
		{name: "plan-swapped-lines", cmd: "exec", want: "plan graphs: graph prefill: node 32 of the schedule is %33 (act_quant): IDs must count 0, 1, 2",
			setup: planEdit(false, func(t *testing.T, lines []string) []string {
				i := planLine(t, lines, "  %32 = weight")
				lines[i], lines[i+1] = lines[i+1], lines[i]
				return lines
			})},
		{name: "plan-buf-changed", cmd: "exec", want: "graph prefill: %11 (token_map): takes buffer slot 1 while %9 (token_map) in it is still read by %13 (engram_hist_update)",
			setup: planEdit(false, planReplace("  %11 = token_map", "buf=3", "buf=1"))},
		{name: "plan-output-repointed", cmd: "exec", want: "(matmul): its value is never used (was an output pointed elsewhere?)",
			setup: planEdit(false, func(t *testing.T, lines []string) []string {
				i := planLine(t, lines, "  output logits = %")
				var id int
				if _, err := fmt.Sscan(strings.TrimPrefix(lines[i], "  output logits = %"), &id); err != nil {
					t.Fatal(err)
				}
				lines[i] = strings.Replace(lines[i], "%"+strconv.Itoa(id), "%"+strconv.Itoa(id-1), 1)
				return lines
			})},
		{name: "plan-nan-constant", cmd: "exec", want: `%7 const: attribute "floats": element 0 is NaN, not finite`,
			setup: planEdit(false, planReplace("  %7 = const", "floats=[1.0,", "floats=[nan,"))},
		{name: "plan-no-logits", cmd: "exec", want: `graph prefill: outputs [], want exactly one, logits`,
			setup: planEdit(false, func(t *testing.T, lines []string) []string {
				var out []string
				for _, l := range lines {
					if !strings.HasPrefix(l, "  output logits") {
						out = append(out, l)
					}
				}
				return out
			})},
		{name: "plan-negative-shape", cmd: "exec", want: `state engram.history: dimension "M-100": goes negative`,
			setup: planEdit(false, func(t *testing.T, lines []string) []string {
				for _, p := range []string{"  %12 = state", "  %13 = engram_hist_update"} {
					lines = planReplace(p, "i64[B,M]", "i64[B,M-100]")(t, lines)
				}
				return lines
			})},
		{name: "plan-rope-dim-zero", cmd: "exec", want: "rope_table: dim 0 must be positive and even",
			setup: planEdit(false, planReplace("  %31 = rope_table", "dim=16", "dim=0"))},
		{name: "plan-header-type", cmd: "exec", want: `plan header: field "format_version": want an integer, got string`,
			setup: planEdit(false, func(t *testing.T, lines []string) []string {
				lines[1] = strings.Replace(lines[1], `"format_version":2`, `"format_version":"2"`, 1)
				return lines
			})},
		{name: "logits-nan", cmd: "exec", want: "prefill: logits hold NaN at row 0, position 2: the weights or the plan are bad",
			// The route scale: 1e300 is finite, but the kernel rounds the
			// scalar to fp32, +Inf, and the expert mix becomes NaN. The
			// prefill computes the last (third) position's logits only.
			setup: planEdit(false, planReplace("  %93 = mul_scalar", "value=1.5", "value=1e300"))},
		{name: "trace-in-flat", cmd: "exec", want: `tensor "prefill.L0.stream_out" has shape [29696], the run's value has [2 29 4 128]`,
			setup: planTrace("prefill.L0.stream_out", []int{29696})},
		{name: "trace-in-ids-empty", cmd: "exec", want: `tensor "inputs.input_ids" has shape [0 29], want [rows, tokens] with at least one of each`,
			setup: planTrace("inputs.input_ids", []int{0, 29})},
	}...)
}
