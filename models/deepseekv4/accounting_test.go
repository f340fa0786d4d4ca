package deepseekv4

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
)

// findComp walks a path of component names ("moe/routed_experts").
func findComp(comps []*Component, path string) *Component {
	var at *Component
	for _, p := range strings.Split(path, "/") {
		var next *Component
		for _, c := range comps {
			if c.Name == p {
				next = c
				break
			}
		}
		if next == nil {
			return nil
		}
		at, comps = next, next.Children
	}
	return at
}

func releaseAccounting(t *testing.T) (*Config, *Accounting) {
	t.Helper()
	m := releaseModule(t)
	c := loadRelease(t)
	return c, Account(c, m.Graph("prefill"))
}

// TestAccountingSpec7 pins every count of spec §7 and the seed pages.
func TestAccountingSpec7(t *testing.T) {
	_, acc := releaseAccounting(t)
	type want struct {
		path      string
		params    int64
		instances int64
	}
	layerKinds := []struct {
		name      string
		total     int64
		instances int64
		attention int64
	}{
		{"sliding-window layer", 13_754_511_990, 2, 126_617_408},
		{"full layer (ratio 2)", 13_765_227_766, 3, 137_333_184},
		{"full layer (ratio 1)", 13_762_606_326, 1, 134_711_744},
		{"re-indexing layer", 13_759_918_710, 4, 132_024_128},
		{"reuse layer", 13_754_511_990, 30, 126_617_408},
	}
	for _, k := range layerKinds {
		t.Run(k.name, func(t *testing.T) {
			lc := findComp(acc.Components, k.name)
			if lc == nil {
				t.Fatalf("no component %q in %v", k.name, names(acc.Components))
			}
			if lc.Params != k.total || lc.Instances != k.instances {
				t.Errorf("%s: %d × %d, want %d × %d", k.name, lc.Params, lc.Instances, k.total, k.instances)
			}
			ws := []want{
				{"hc_attn", 491_547, 1}, {"hc_attn/mix_projection", 491_520, 1}, {"hc_attn/pre", 5, 1}, {"hc_attn/post", 5, 1}, {"hc_attn/comb", 17, 1},
				{"hc_ffn", 491_547, 1}, {"hc_ffn/mix_projection", 491_520, 1}, {"hc_ffn/pre", 5, 1},
				{"attn_norm", 5_120, 1}, {"ffn_norm", 5_120, 1},
				{"attention", k.attention, 1},
				{"attention/core", 126_617_408, 1},
				{"attention/core/wq_a", 6_553_600, 1}, {"attention/core/q_norm", 1_280, 1},
				{"attention/core/wq_b", 41_943_040, 1}, {"attention/core/wkv", 2_621_440, 1},
				{"attention/core/kv_norm", 512, 1}, {"attention/core/wo_a", 33_554_432, 1},
				{"attention/core/wo_b", 41_943_040, 1}, {"attention/core/attn_sink", 64, 1},
				{"moe", 13_626_901_248, 1},
				{"moe/routed_experts", 35_389_440, 384},
				{"moe/shared_expert", 35_389_440, 1},
				{"moe/gate", 1_966_080 + 768, 1}, {"moe/gate/weight", 1_966_080, 1},
				{"moe/gate/bias", 384, 1}, {"moe/gate/bias_vl", 384, 1},
			}
			switch k.name {
			case "full layer (ratio 2)":
				ws = append(ws, want{"attention/indexer", 5_472_384, 1}, want{"attention/compressor", 5_243_392, 1},
					want{"attention/indexer/wk", 65_536, 1}, want{"attention/indexer/k_norm", 128, 1},
					want{"attention/compressor/wgate", 2_621_440, 1})
			case "full layer (ratio 1)":
				ws = append(ws, want{"attention/indexer", 5_472_384, 1}, want{"attention/compressor", 2_621_952, 1})
				if findComp(lc.Children, "attention/compressor/wgate") != nil {
					t.Errorf("ratio-1 compressor has a wgate")
				}
			case "re-indexing layer":
				ws = append(ws, want{"attention/indexer", 5_406_720, 1},
					want{"attention/indexer/wq_b", 5_242_880, 1}, want{"attention/indexer/weights_proj", 163_840, 1})
				if findComp(lc.Children, "attention/indexer/wk") != nil || findComp(lc.Children, "attention/compressor") != nil {
					t.Errorf("re-indexing layer owns index keys or a compressor")
				}
			default:
				if findComp(lc.Children, "attention/indexer") != nil || findComp(lc.Children, "attention/compressor") != nil {
					t.Errorf("%s has an indexer or a compressor", k.name)
				}
			}
			for _, w := range ws {
				c := findComp(lc.Children, w.path)
				if c == nil {
					t.Errorf("%s: no %s", k.name, w.path)
					continue
				}
				if c.Params != w.params || c.Instances != w.instances {
					t.Errorf("%s/%s: %d × %d, want %d × %d", k.name, w.path, c.Params, c.Instances, w.params, w.instances)
				}
			}
			if r := findComp(lc.Children, "moe/routed_experts"); r != nil && r.Total() != 13_589_544_960 {
				t.Errorf("routed experts total %d, want 13,589,544,960", r.Total())
			}
		})
	}
	// The re-indexing total as the seed page writes it.
	if got := int64(491_547 + 5_120 + 132_024_128 + 491_547 + 5_120 + 13_626_901_248); got != 13_759_918_710 {
		t.Fatalf("arithmetic: %d", got)
	}
	if acc.Total != 748_494_684_784 || acc.Backbone != 551_880_835_184 || acc.EngramTables != 196_613_849_600 {
		t.Errorf("total %d backbone %d tables %d, want 748,494,684,784 / 551,880,835,184 / 196,613,849,600", acc.Total, acc.Backbone, acc.EngramTables)
	}
	var sum int64
	for _, c := range acc.Components {
		sum += c.Total()
	}
	if sum != acc.Total {
		t.Errorf("components sum to %d, total says %d", sum, acc.Total)
	}
	if len(acc.Ignored) != 2 {
		t.Errorf("ignored parts %v, want the DSpark/MTP and vision notes", acc.Ignored)
	}
}

func names(cs []*Component) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestAccountingWholeModelIndependent recomputes the totals from the config
// values alone (no graph) and compares them with Account.
func TestAccountingWholeModelIndependent(t *testing.T) {
	c, acc := releaseAccounting(t)
	i := func(v int) int64 { return int64(v) }
	D, V, HC := i(c.Dim), i(c.VocabSize), i(c.HCMult)
	H, Dh, QR := i(c.NHeads), i(c.HeadDim), i(c.QLoraRank)
	G, OR := i(c.OGroups), i(c.OLoraRank)
	E, I := i(c.NRoutedExperts), i(c.MoEInterDim)
	Hi, Di := i(c.IndexNHeads), i(c.IndexHeadDim)

	mix := (2 + HC) * HC
	hc := mix*HC*D + mix + 3
	core := D*QR + QR + QR*H*Dh + D*Dh + Dh + G*OR*(H*Dh/G) + G*OR*D + H
	idxNonOwner := QR*Hi*Di + Hi*D
	idxOwner := idxNonOwner + Dh*Di + Di
	comp2 := 2*D*Dh + Dh
	comp1 := D*Dh + Dh
	expert := 3 * D * I
	moe := (E+1)*expert + E*D + 2*E
	layer := func(attn int64) int64 { return 2*hc + 2*D + attn + moe }

	for _, chk := range []struct {
		name      string
		got, want int64
	}{
		{"hc", hc, 491_547}, {"hc fn", mix * HC * D, 491_520}, {"core", core, 126_617_408},
		{"indexer owner", idxOwner, 5_472_384}, {"indexer non-owner", idxNonOwner, 5_406_720},
		{"compressor r2", comp2, 5_243_392}, {"compressor r1", comp1, 2_621_952},
		{"one expert", expert, 35_389_440}, {"routed", E * expert, 13_589_544_960}, {"moe", moe, 13_626_901_248},
		{"reindex attention", core + idxNonOwner, 132_024_128},
		{"swa/reuse layer", layer(core), 13_754_511_990}, {"reindex layer", layer(core + idxNonOwner), 13_759_918_710},
		{"full r2 layer", layer(core + idxOwner + comp2), 13_765_227_766}, {"full r1 layer", layer(core + idxOwner + comp1), 13_762_606_326},
	} {
		if chk.got != chk.want {
			t.Errorf("%s: %d from the config, spec §7 says %d", chk.name, chk.got, chk.want)
		}
	}

	// Layer counts from the spec §3 table.
	var layers int64
	for _, s := range releaseSpecTable() {
		switch {
		case s.kind == "swa" || s.kind == "reuse":
			layers += layer(core)
		case s.kind == "reindex":
			layers += layer(core + idxNonOwner)
		case s.ratio == 2:
			layers += layer(core + idxOwner + comp2)
		default:
			layers += layer(core + idxOwner + comp1)
		}
	}
	cols := int64(c.EngramMaxNgramSize-1) * i(c.EngramNHeads) // 24 table columns
	W := i(c.EngramHeadDim)
	var engramProj, tables int64
	for _, rows := range c.EngramNumEmbeddings {
		engramProj += (HC+1)*D*cols*W + 2*HC*D // wkv 25600×6144 + q/k weights
		tables += rows * W
	}
	if (HC+1)*D != 25600 || cols*W != 6144 {
		t.Fatalf("Engram wkv %d×%d, want 25600×6144", (HC+1)*D, cols*W)
	}
	total := V*D + V*D + D + layers + engramProj + tables
	t.Logf("independent: total %d, backbone %d, tables %d", total, total-tables, tables)
	if total != 748_494_684_784 || total-tables != 551_880_835_184 || tables != 196_613_849_600 {
		t.Errorf("independent arithmetic: total %d backbone %d tables %d, want 748,494,684,784 / 551,880,835,184 / 196,613,849,600", total, total-tables, tables)
	}
	if acc.Total != total || acc.EngramTables != tables || acc.Backbone != total-tables {
		t.Errorf("Account: total %d backbone %d tables %d; independent: %d %d %d", acc.Total, acc.Backbone, acc.EngramTables, total, total-tables, tables)
	}
	for _, name := range []string{"embedding", "head"} {
		if cc := findComp(acc.Components, name); cc == nil || cc.Total() != V*D {
			t.Errorf("%s: %v, want %d", name, cc, V*D)
		}
	}
	if cc := findComp(acc.Components, "final_norm"); cc == nil || cc.Total() != D {
		t.Errorf("final_norm: %v, want %d", cc, D)
	}
	for k, l := range c.EngramLayerIDs {
		name := fmt.Sprintf("engram (layer %d)", l)
		e := findComp(acc.Components, name)
		if e == nil {
			t.Errorf("no %s", name)
			continue
		}
		if tb := findComp(e.Children, "table"); tb == nil || tb.Params != c.EngramNumEmbeddings[k]*W {
			t.Errorf("%s table: %v, want %d", name, tb, c.EngramNumEmbeddings[k]*W)
		}
		if e.Total() != (HC+1)*D*cols*W+2*HC*D+c.EngramNumEmbeddings[k]*W {
			t.Errorf("%s: %d", name, e.Total())
		}
	}
}

// TestAccountingJSONSchema checks the field names of -explain-json.
func TestAccountingJSONSchema(t *testing.T) {
	_, acc := releaseAccounting(t)
	js, err := json.Marshal(acc)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"total", "backbone", "engram_tables", "components"} {
		if _, ok := top[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, js[:min(200, len(js))])
		}
	}
	var comps []map[string]json.RawMessage
	if err := json.Unmarshal(top["components"], &comps); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "params", "instances", "children"} {
		if _, ok := comps[1][k]; !ok {
			t.Errorf("component has no %q", k)
		}
	}
}

// TestAccountingTinyFormat: the tiny config accounts and prints.
func TestAccountingTinyFormat(t *testing.T) {
	c := loadTiny(t)
	m, err := BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	acc := Account(c, m.Graph("prefill"))
	if acc.Total <= 0 || acc.Backbone+acc.EngramTables != acc.Total {
		t.Fatalf("tiny accounting %+v", acc)
	}
	out := acc.Format()
	if !strings.HasPrefix(out, "total ") || !strings.Contains(out, "re-indexing layer") {
		t.Errorf("Format:\n%s", out)
	}
	t.Logf("tiny: total %d (backbone %d + tables %d)", acc.Total, acc.Backbone, acc.EngramTables)
}

// TestAccountingTinyCheckpoint: the tiny accounting equals the parameter
// count of the tiny checkpoint itself (scales excluded, packed fp4 bytes
// counted as two values).
func TestAccountingTinyCheckpoint(t *testing.T) {
	c := loadTiny(t)
	m, err := BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	acc := Account(c, m.Graph("prefill"))
	set, err := safetensors.OpenDir(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var n, tables int64
	for _, name := range set.Names() {
		if strings.HasSuffix(name, ".scale") {
			continue
		}
		x, _ := set.Get(name)
		k := int64(x.NumElements())
		if strings.Contains(name, ".ffn.experts.") && (x.DType == "I8" || x.DType == "U8") {
			k *= 2 // packed e2m1
		}
		if strings.HasSuffix(name, ".engram.embed.weight") {
			tables += k
		}
		n += k
	}
	t.Logf("tiny checkpoint: %d parameters (%d in Engram tables); accounting %d (%d)", n, tables, acc.Total, acc.EngramTables)
	if n != acc.Total || tables != acc.EngramTables {
		t.Errorf("checkpoint holds %d parameters (%d in tables), accounting says %d (%d)", n, tables, acc.Total, acc.EngramTables)
	}
}
