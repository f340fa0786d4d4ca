package backendtest

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/ir"
)

// TestEveryOpHasACase fails when an op of the IR table has no case, or a
// case names an op the table does not have.
func TestEveryOpHasACase(t *testing.T) {
	count := map[string]int{}
	names := map[string]bool{}
	for _, c := range Cases() {
		if names[c.Name] {
			t.Errorf("case %s appears twice", c.Name)
		}
		names[c.Name] = true
		if ir.Ops[c.Op] == nil {
			t.Errorf("case %s: op %q is not in ir.Ops", c.Name, c.Op)
		}
		if c.Tol.Why == "" {
			t.Errorf("case %s: the tolerance gives no reason", c.Name)
		}
		count[c.Op]++
	}
	var missing, per []string
	for op := range ir.Ops {
		if count[op] == 0 {
			missing = append(missing, op)
		}
		per = append(per, op+"×"+itoa(count[op]))
	}
	sort.Strings(missing)
	sort.Strings(per)
	if len(missing) > 0 {
		t.Errorf("ops without a conformance case: %s", strings.Join(missing, ", "))
	}
	t.Logf("%d cases over %d ops: %s", len(Cases()), len(ir.Ops), strings.Join(per, " "))
}

// TestReleasedWidths checks the widths the cases use against the released
// config.
func TestReleasedWidths(t *testing.T) {
	raw, err := os.ReadFile("../../models/deepseekv4/testdata/configs/deepseek-v41-flash.json")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"dim": rel.Dim, "n_heads": rel.Heads, "head_dim": rel.HeadDim, "rope_head_dim": rel.RopeDim, "q_lora_rank": rel.QLora,
		"o_groups": rel.OGroups, "o_lora_rank": rel.OLora, "n_routed_experts": rel.Experts, "n_activated_experts": rel.Active,
		"moe_inter_dim": rel.Inter, "index_n_heads": rel.IdxHeads, "index_head_dim": rel.IdxDim, "index_topk": rel.IdxTopK,
		"window_size": rel.Window, "hc_mult": rel.HC, "hc_sinkhorn_iters": rel.SinkhornIters, "engram_n_heads": rel.EngHeads,
		"engram_head_dim": rel.EngDim, "engram_max_ngram_size": rel.EngNgram, "engram_compressed_vocab_size": rel.EngCompressedVocab,
		"candidate_block_size": rel.CandBlock, "candidate_topk_blocks": rel.CandTopK, "vocab_size": rel.Vocab,
		"original_seq_len": rel.OriginalSeqLen, "norm_eps": rel.NormEps, "hc_eps": rel.HCEps, "swiglu_limit": rel.SwiGLULimit,
		"route_scale": rel.RouteScale, "rope_theta": rel.RopeTheta, "compress_rope_theta": rel.CompressRopeTheta,
		"rope_factor": rel.RopeFactor, "beta_fast": rel.BetaFast, "beta_slow": rel.BetaSlow,
	}
	for k, v := range want {
		got, ok := c[k].(float64)
		if !ok || got != reflect.ValueOf(v).Convert(reflect.TypeOf(0.0)).Float() {
			t.Errorf("%s: config has %v, the suite uses %v", k, c[k], v)
		}
	}
}

// TestCasesOnReference runs every case once on the reference backend and
// checks that it tests something: the op under test runs there, and no
// output of more than one element is constant (all zero, say, because the
// inputs selected nothing).
func TestCasesOnReference(t *testing.T) {
	seed := Seed(t)
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			in := Build(t, c, seed)
			if n := in.node(c.Op); n == nil {
				t.Fatalf("the graph has no %s node", c.Op)
			}
			res, err := Exec(Reference, in)
			if err != nil {
				t.Fatalf("%v (seed %d)", err, seed)
			}
			for name, o := range res.Outputs {
				if constant(o) {
					t.Errorf("output %s is constant: the case tests nothing (seed %d)", name, seed)
				}
			}
		})
	}
}

// constant reports whether every value of t is the same.
func constant(t *backends.Tensor) bool {
	switch {
	case t.F32 != nil:
		for _, v := range t.F32 {
			if math.Float32bits(v) != math.Float32bits(t.F32[0]) {
				return false
			}
		}
	case t.I64 != nil:
		for _, v := range t.I64 {
			if v != t.I64[0] {
				return false
			}
		}
	case t.I32 != nil:
		for _, v := range t.I32 {
			if v != t.I32[0] {
				return false
			}
		}
	default:
		for _, v := range t.U8 {
			if v != t.U8[0] {
				return false
			}
		}
	}
	return t.NumElements() > 1
}

// TestForcedProbeReplaces checks the forced probe case itself: on the
// reference, the probe's reader sees the forced value (so a backend that
// ignores Env.Probe fails the case), and the traced value is the unforced one.
func TestForcedProbeReplaces(t *testing.T) {
	c := caseNamed(t, "probe/forced")
	in := Build(t, c, Seed(t))
	res, err := Exec(Reference, in)
	if err != nil {
		t.Fatal(err)
	}
	forced, x := in.Forced["x2"], in.Inputs["x0"]
	out := res.Outputs["out"]
	if out == nil || len(out.F32) != len(forced.F32) {
		t.Fatalf("output out is %v, want %d floats", out, len(forced.F32))
	}
	for i, v := range out.F32 {
		if want := forced.F32[i] * 0.5; v != want {
			t.Fatalf("out[%d] = %g, want the forced value's half %g", i, v, want)
		}
		if p, want := res.Probes["x2"].F32[i], x.F32[i]*2; p != want {
			t.Fatalf("traced x2[%d] = %g, want %g", i, p, want)
		}
	}
}
