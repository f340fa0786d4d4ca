package deepseekv4

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ds4go/ds4/ir"
)

// The released module is built once and shared by the graph and accounting
// tests (shape only: no weights are touched).
var (
	releaseOnce sync.Once
	releaseMod  *ir.Module
	releaseErr  error
	releaseDur  time.Duration
)

func releaseModule(t *testing.T) *ir.Module {
	t.Helper()
	c := loadRelease(t)
	releaseOnce.Do(func() {
		t0 := time.Now()
		releaseMod, releaseErr = BuildModule(c)
		releaseDur = time.Since(t0)
	})
	if releaseErr != nil {
		t.Fatalf("BuildModule(release): %v", releaseErr)
	}
	return releaseMod
}

// gview indexes one graph by the `name` attribute of its nodes.
type gview struct {
	g      *ir.Graph
	byName map[string][]*ir.Node // weights, probes, states, inputs
}

func newView(t *testing.T, g *ir.Graph) *gview {
	t.Helper()
	if g == nil {
		t.Fatal("graph missing")
	}
	v := &gview{g: g, byName: map[string][]*ir.Node{}}
	for _, n := range g.Nodes {
		if nm := n.Attrs.Str("name", ""); nm != "" {
			v.byName[nm] = append(v.byName[nm], n)
		}
	}
	return v
}

// one returns the single node of op carrying name.
func (v *gview) one(t *testing.T, op, name string) *ir.Node {
	t.Helper()
	var out []*ir.Node
	for _, n := range v.byName[name] {
		if n.Op == op {
			out = append(out, n)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%s graph: %d %s nodes named %q, want 1", v.g.Name, len(out), op, name)
	}
	return out[0]
}

func (v *gview) has(op, name string) bool {
	for _, n := range v.byName[name] {
		if n.Op == op {
			return true
		}
	}
	return false
}

// layerWeights lists the weight names of backbone layer l (Engram included).
func (v *gview) layerWeights(l int) map[string]bool {
	out := map[string]bool{}
	p := fmt.Sprintf("layers.%d.", l)
	for name, ns := range v.byName {
		if strings.HasPrefix(name, p) && ns[0].Op == "weight" {
			out[strings.TrimPrefix(name, p)] = true
		}
	}
	return out
}

// ancestors returns n and every node it depends on.
func ancestors(n *ir.Node) map[*ir.Node]bool {
	seen := map[*ir.Node]bool{}
	stack := []*ir.Node{n}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		stack = append(stack, x.Args...)
	}
	return seen
}

// attnSub is the attention subgraph of layer l: the nodes L{l}.attn_out
// depends on that L{l}.attn_in does not (source layers' work is upstream of
// attn_in, so a Reuse layer's subgraph holds only what it computes itself).
func (v *gview) attnSub(t *testing.T, l int) []*ir.Node {
	t.Helper()
	in := ancestors(v.one(t, "probe", fmt.Sprintf("L%d.attn_in", l)))
	var out []*ir.Node
	for n := range ancestors(v.one(t, "probe", fmt.Sprintf("L%d.attn_out", l))) {
		if !in[n] {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func opCount(ns []*ir.Node, op string) int {
	k := 0
	for _, n := range ns {
		if n.Op == op {
			k++
		}
	}
	return k
}

func ofOp(ns []*ir.Node, op string) []*ir.Node {
	var out []*ir.Node
	for _, n := range ns {
		if n.Op == op {
			out = append(out, n)
		}
	}
	return out
}

// stateOf follows first arguments (cache_write, window_update, ...) back to
// the state node and returns its name.
func stateOf(n *ir.Node) string {
	for n != nil {
		if n.Op == "state" {
			return n.Attrs.Str("name", "")
		}
		if len(n.Args) == 0 {
			return ""
		}
		n = n.Args[0]
	}
	return ""
}

// through skips probes.
func through(n *ir.Node) *ir.Node {
	for n.Op == "probe" {
		n = n.Args[0]
	}
	return n
}

func TestReleaseModuleVerifiesAndRoundTrips(t *testing.T) {
	m := releaseModule(t)
	t.Logf("BuildModule(release config): %v, %d + %d nodes", releaseDur, len(m.Graph("prefill").Nodes), len(m.Graph("decode").Nodes))
	if len(m.Graphs) != 3 || m.Graph("prefill") == nil || m.Graph("decode") == nil || m.Graph("chunk") == nil {
		t.Fatalf("module graphs: want prefill, decode and chunk, got %d", len(m.Graphs))
	}
	if err := ir.VerifyModule(m); err != nil {
		t.Fatalf("VerifyModule: %v", err)
	}
	for _, g := range m.Graphs {
		if err := ir.Verify(g); err != nil {
			t.Errorf("Verify(%s): %v", g.Name, err)
		}
	}
	t0 := time.Now()
	text := ir.Format(m)
	m2, err := ir.Parse(text)
	if err != nil {
		t.Fatalf("Parse(Format(m)): %v", err)
	}
	if err := ir.VerifyModule(m2); err != nil {
		t.Fatalf("VerifyModule(parsed): %v", err)
	}
	text2 := ir.Format(m2)
	t.Logf("format+parse+format of %d bytes: %v", len(text), time.Since(t0))
	if text != text2 {
		a, b := strings.Split(text, "\n"), strings.Split(text2, "\n")
		for i := 0; i < len(a) && i < len(b); i++ {
			if a[i] != b[i] {
				t.Fatalf("text does not round-trip; first difference at line %d:\n  %s\n  %s", i+1, a[i], b[i])
			}
		}
		t.Fatalf("text does not round-trip: %d vs %d lines", len(a), len(b))
	}
	if m.Meta["config_fingerprint"] == "" {
		t.Errorf("module meta has no config_fingerprint")
	}
}

// specLayer is the layout table of spec §3, written out independently of
// Config.Layers.
type specLayer struct {
	kind  string // swa, full, reuse, reindex
	ratio int
	kvSrc int // layer whose compress_kv_cache is read (-1: none)
	topk  int // layer whose index_topk is used (-1: none)
}

func releaseSpecTable() []specLayer {
	out := make([]specLayer, 40)
	for l := range out {
		switch {
		case l < 2:
			out[l] = specLayer{"swa", 0, -1, -1}
		case l < 20:
			src := 2 + 6*((l-2)/6)
			k := "reuse"
			if l == src {
				k = "full"
			}
			out[l] = specLayer{k, 2, src, src}
		case l < 24:
			k := "reuse"
			if l == 20 {
				k = "full"
			}
			out[l] = specLayer{k, 1, 20, 20}
		default:
			src := 24 + 4*((l-24)/4)
			k := "reuse"
			if l == src {
				k = "reindex"
			}
			out[l] = specLayer{k, 1, 20, src}
		}
	}
	return out
}

func TestReleaseSpecTableMatchesLayers(t *testing.T) {
	c := loadRelease(t)
	counts := map[string]int{}
	for l, s := range releaseSpecTable() {
		counts[s.kind]++
		L := c.Layers()[l]
		if L.Kind.String() != s.kind || L.Ratio != s.ratio || L.KVFrom != s.kvSrc || L.TopKFrom != s.topk {
			t.Errorf("layer %d: Layers() = %s r%d kv<-%d topk<-%d, spec %s r%d kv<-%d topk<-%d",
				l, L.Kind, L.Ratio, L.KVFrom, L.TopKFrom, s.kind, s.ratio, s.kvSrc, s.topk)
		}
	}
	if counts["swa"] != 2 || counts["full"] != 4 || counts["reindex"] != 4 || counts["reuse"] != 30 {
		t.Errorf("kind counts %v, want 2 swa, 4 full, 4 reindex, 30 reuse", counts)
	}
}

var compressedOps = []string{"compressor_pool", "group_state_update", "cache_write", "cache_read", "index_score",
	"index_mask", "index_topk", "candidate_blocks", "mask_fill"}

// checkLayerGraph runs the per-kind assertions on one graph.
func checkLayerGraph(t *testing.T, v *gview, l int, s specLayer) {
	t.Helper()
	sub := v.attnSub(t, l)
	w := v.layerWeights(l)
	hasW := func(n string) bool { return w["attn."+n] }
	for _, core := range []string{"wq_a.weight", "q_norm.weight", "wq_b.weight", "wkv.weight", "kv_norm.weight", "wo_a.weight", "wo_b.weight", "attn_sink"} {
		if !hasW(core) {
			t.Errorf("layer %d: attention core weight %s missing", l, core)
		}
	}
	if opCount(sub, "sparse_attn") != 1 {
		t.Fatalf("layer %d: %d sparse_attn in the attention, want 1", l, opCount(sub, "sparse_attn"))
	}
	// The ring update is a state side effect (in prefill nothing reads it).
	ring := 0
	for _, n := range ofOp(v.g.Nodes, "window_update") {
		if stateOf(n) == fmt.Sprintf("L%d.window_kv_cache", l) {
			ring++
		}
	}
	if ring != 1 {
		t.Errorf("layer %d: %d window_update nodes into L%d.window_kv_cache, want 1", l, ring, l)
	}
	ownCompressor := hasW("compressor.wkv.weight")
	ownIndexer := hasW("indexer.wq_b.weight")
	switch s.kind {
	case "swa":
		for _, op := range compressedOps {
			if k := opCount(sub, op); k != 0 {
				t.Errorf("SWA layer %d: %d %s nodes, want none", l, k, op)
			}
		}
		if ownCompressor || ownIndexer {
			t.Errorf("SWA layer %d: has compressor/indexer weights", l)
		}
		if v.has("state", fmt.Sprintf("L%d.compress_kv_cache", l)) || v.has("state", fmt.Sprintf("L%d.index_k_cache", l)) {
			t.Errorf("SWA layer %d: has a compressed cache", l)
		}
		if idx := through(v.one(t, "probe", fmt.Sprintf("L%d.attn_idxs", l))); idx.Op != "window_idx" {
			t.Errorf("SWA layer %d: attention indices come from %s, want window_idx", l, idx.Op)
		}
		return
	case "reuse":
		if ownCompressor || ownIndexer {
			t.Errorf("Reuse layer %d: has compressor/indexer weights %v", l, w)
		}
		for _, op := range []string{"compressor_pool", "group_state_update", "cache_write", "index_score", "index_topk", "candidate_blocks", "mask_fill"} {
			if k := opCount(sub, op); k != 0 {
				t.Errorf("Reuse layer %d: %d %s nodes, want none", l, k, op)
			}
		}
		if v.has("probe", fmt.Sprintf("L%d.index_topk", l)) || v.has("state", fmt.Sprintf("L%d.compress_kv_cache", l)) {
			t.Errorf("Reuse layer %d: has its own top-k probe or compressed cache", l)
		}
	case "full":
		if !ownCompressor || !ownIndexer || !hasW("indexer.wk.weight") || !hasW("indexer.k_norm.weight") || !hasW("compressor.norm.weight") {
			t.Errorf("Full layer %d: weights %v, want compressor wkv/norm and indexer wq_b/wk/k_norm", l, keys(w))
		}
		if s.ratio == 2 {
			if !hasW("compressor.wgate.weight") {
				t.Errorf("Full r=2 layer %d: compressor.wgate missing", l)
			}
			if opCount(sub, "compressor_pool") != 1 || opCount(sub, "group_state_update") != 2 {
				t.Errorf("Full r=2 layer %d: %d compressor_pool, %d group_state_update, want 1 and 2", l, opCount(sub, "compressor_pool"), opCount(sub, "group_state_update"))
			}
		} else {
			if hasW("compressor.wgate.weight") {
				t.Errorf("Full r=1 layer %d: has compressor.wgate", l)
			}
			if opCount(sub, "compressor_pool") != 0 || opCount(sub, "group_state_update") != 0 {
				t.Errorf("Full r=1 layer %d: has a gated pool", l)
			}
		}
		if opCount(sub, "cache_write") != 2 {
			t.Errorf("Full layer %d: %d cache_write, want 2 (compressed KV and index keys)", l, opCount(sub, "cache_write"))
		}
		written := map[string]bool{}
		for _, n := range ofOp(sub, "cache_write") {
			written[stateOf(n)] = true
		}
		for _, st := range []string{fmt.Sprintf("L%d.compress_kv_cache", l), fmt.Sprintf("L%d.index_k_cache", l)} {
			if !written[st] {
				t.Errorf("Full layer %d: no cache_write into %s (writes %v)", l, st, keys(written))
			}
		}
		if !v.has("probe", fmt.Sprintf("L%d.compressor_latent", l)) {
			t.Errorf("Full layer %d: no compressor_latent probe", l)
		}
		// The candidate pool is consumed only by later Reindex layers, so it
		// is not part of this layer's attention subgraph: find it by probe.
		hasCand := v.has("probe", fmt.Sprintf("L%d.candidates", l))
		if hasCand != (l == 20) {
			t.Errorf("Full layer %d: candidates probe present = %v, want only at the candidate source 20", l, hasCand)
		}
		if l == 20 {
			cb := through(v.one(t, "probe", "L20.candidates"))
			if cb.Op != "candidate_blocks" || opCount(v.g.Nodes, "candidate_blocks") != 1 {
				t.Errorf("layer 20: candidates probe is a %s (%d candidate_blocks in the graph), want the single candidate_blocks", cb.Op, opCount(v.g.Nodes, "candidate_blocks"))
			}
			if cb.Attrs.Int("topk_blocks", 0) != 2048 || cb.Attrs.Int("block", 0) != 8 {
				t.Errorf("layer 20: candidate_blocks attrs %v, want topk_blocks 2048, block 8", cb.Attrs)
			}
			// Its scores are layer 20's own index scores.
			sc := cb.Args[0]
			if sc.Op != "index_mask" || sc.Args[0].Op != "index_score" || stateOf(sc.Args[0].Args[1]) != "L20.index_k_cache" {
				t.Errorf("layer 20: candidate_blocks does not score L20's own index keys")
			}
		}
		if opCount(sub, "mask_fill") != 0 {
			t.Errorf("Full layer %d: uses candidates (mask_fill)", l)
		}
	case "reindex":
		if ownCompressor || !ownIndexer || hasW("indexer.wk.weight") || hasW("indexer.k_norm.weight") || !hasW("indexer.weights_proj.weight") {
			t.Errorf("Reindex layer %d: weights %v, want indexer wq_b/weights_proj without wk/k_norm, no compressor", l, keys(w))
		}
		if opCount(sub, "cache_write") != 0 || v.has("probe", fmt.Sprintf("L%d.candidates", l)) {
			t.Errorf("Reindex layer %d: writes a cache or builds candidates", l)
		}
		if v.has("state", fmt.Sprintf("L%d.index_k_cache", l)) {
			t.Errorf("Reindex layer %d: has its own index_k cache", l)
		}
	}

	// Index sources: the indexer chain index_topk <- [mask_fill <-] index_mask <- index_score.
	if s.kind == "full" || s.kind == "reindex" {
		tk := through(v.one(t, "probe", fmt.Sprintf("L%d.index_topk", l)))
		if tk.Op != "index_topk" {
			t.Fatalf("layer %d: L%d.index_topk probes a %s", l, l, tk.Op)
		}
		sc := tk.Args[0]
		if s.kind == "reindex" {
			if sc.Op != "mask_fill" {
				t.Fatalf("Reindex layer %d: top-k scores come from %s, want mask_fill", l, sc.Op)
			}
			if c := sc.Args[1]; c.Op != "probe" || c.Attrs.Str("name", "") != "L20.candidates" || through(c).Op != "candidate_blocks" {
				t.Errorf("Reindex layer %d: mask_fill mask is %s %q, want the L20.candidates probe", l, c.Op, c.Attrs.Str("name", ""))
			}
			sc = sc.Args[0]
		}
		if sc.Op != "index_mask" || sc.Args[0].Op != "index_score" {
			t.Fatalf("layer %d: indexer chain %s <- %s, want index_mask <- index_score", l, sc.Op, sc.Args[0].Op)
		}
		keysN := sc.Args[0].Args[1]
		if keysN.Op != "cache_read" {
			t.Fatalf("layer %d: index keys come from %s, want cache_read", l, keysN.Op)
		}
		wantK := fmt.Sprintf("L%d.index_k_cache", l)
		if s.kind == "reindex" {
			wantK = "L20.index_k_cache"
		}
		if got := stateOf(keysN); got != wantK {
			t.Errorf("layer %d: indexer reads keys of %q, want %q", l, got, wantK)
		}
	}

	// Every compressed layer: the compressed KV read and the top-k used.
	reads := ofOp(sub, "cache_read")
	var kvReads []*ir.Node
	for _, r := range reads {
		if strings.HasSuffix(stateOf(r), ".compress_kv_cache") {
			kvReads = append(kvReads, r)
		}
	}
	if len(kvReads) != 1 {
		t.Fatalf("layer %d: %d cache_reads of compressed KV, want 1", l, len(kvReads))
	}
	if got, want := stateOf(kvReads[0]), fmt.Sprintf("L%d.compress_kv_cache", s.kvSrc); got != want {
		t.Errorf("layer %d: attention reads %q, want %q", l, got, want)
	}
	if r := kvReads[0].Attrs.Int("ratio", 0); r != int64(s.ratio) {
		t.Errorf("layer %d: cache_read ratio %d, want %d", l, r, s.ratio)
	}
	if s.kind == "reuse" && len(reads) != 1 {
		t.Errorf("Reuse layer %d: %d cache_reads, want only the compressed KV", l, len(reads))
	}
	cat := through(v.one(t, "probe", fmt.Sprintf("L%d.attn_idxs", l)))
	if cat.Op != "concat" || len(cat.Args) != 2 || cat.Args[0].Op != "window_idx" {
		t.Fatalf("layer %d: attention indices are %s, want concat(window_idx, top-k)", l, cat.Op)
	}
	tp := cat.Args[1]
	if tp.Op != "probe" || tp.Attrs.Str("name", "") != fmt.Sprintf("L%d.index_topk", s.topk) {
		t.Errorf("layer %d: index concat uses %s %q, want the L%d.index_topk probe", l, tp.Op, tp.Attrs.Str("name", ""), s.topk)
	}
	sa := ofOp(sub, "sparse_attn")[0]
	if len(sa.Args) != 5 || sa.Args[4] != kvReads[0] || sa.Args[1].Op == "concat" {
		t.Errorf("layer %d: sparse_attn does not read the window's rows then the compressed cache_read's (kv2)", l)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestReleaseLayerKinds(t *testing.T) {
	m := releaseModule(t)
	table := releaseSpecTable()
	for _, gname := range []string{"prefill", "decode"} {
		v := newView(t, m.Graph(gname))
		groups := map[string][]int{}
		for l, s := range table {
			name := s.kind
			if s.kind == "full" {
				name = fmt.Sprintf("full_r%d", s.ratio)
			}
			groups[name] = append(groups[name], l)
		}
		for _, kind := range []string{"swa", "full_r2", "full_r1", "reuse", "reindex"} {
			t.Run(gname+"/"+kind, func(t *testing.T) {
				for _, l := range groups[kind] {
					checkLayerGraph(t, v, l, table[l])
				}
			})
		}
	}
	// Spot checks named in the brief, spelled out.
	v := newView(t, m.Graph("prefill"))
	for l, want := range map[int]string{3: "L2.compress_kv_cache", 21: "L20.compress_kv_cache", 24: "L20.compress_kv_cache", 9: "L8.compress_kv_cache"} {
		var got []string
		for _, r := range ofOp(v.attnSub(t, l), "cache_read") {
			got = append(got, stateOf(r))
		}
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("layer %d: cache_reads %v, want one of %s", l, got, want)
		}
	}
}

func TestReleaseEngramLayers(t *testing.T) {
	m := releaseModule(t)
	for _, g := range m.Graphs {
		v := newView(t, g)
		oc := g.OpCounts()
		for _, op := range []string{"engram_hash", "engram_lookup", "engram_gate"} {
			if oc[op] != 2 {
				t.Errorf("%s: %d %s nodes, want 2 (layers 1 and 14)", g.Name, oc[op], op)
			}
		}
		for l := 0; l < 40; l++ {
			name := fmt.Sprintf("L%d.engram_out", l)
			w := v.layerWeights(l)
			engramW := 0
			for k := range w {
				if strings.HasPrefix(k, "engram.") {
					engramW++
				}
			}
			if l != 1 && l != 14 {
				if v.has("probe", name) || engramW != 0 {
					t.Errorf("%s: layer %d has Engram (probe or %d weights)", g.Name, l, engramW)
				}
				continue
			}
			gate := through(v.one(t, "probe", name))
			if gate.Op != "engram_gate" {
				t.Fatalf("%s: %s probes %s, want engram_gate", g.Name, name, gate.Op)
			}
			anc := ancestors(gate)
			var lookups []*ir.Node
			for n := range anc {
				if n.Op == "engram_lookup" {
					lookups = append(lookups, n)
				}
			}
			// The gate's own lookup: the one whose table is this layer's.
			own := 0
			for _, lk := range lookups {
				if lk.Args[0].Attrs.Str("name", "") == fmt.Sprintf("layers.%d.engram.embed.weight", l) {
					own++
					if lk.Args[1].Op != "engram_hash" {
						t.Errorf("%s: layer %d lookup rows from %s", g.Name, l, lk.Args[1].Op)
					}
				}
			}
			if own != 1 {
				t.Errorf("%s: layer %d: %d lookups of its own table", g.Name, l, own)
			}
			for _, k := range []string{"engram.embed.weight", "engram.wkv.weight", "engram.q_weight", "engram.k_weight"} {
				if !w[k] {
					t.Errorf("%s: layer %d: weight %s missing", g.Name, l, k)
				}
			}
		}
	}
}

// TestReleaseSinkhorn counts the normalisation steps of every comb: a column
// step after the softmax, then 19 (row, column) pairs, ending on a column step.
func TestReleaseSinkhorn(t *testing.T) {
	m := releaseModule(t)
	c := loadRelease(t)
	it := c.HCSinkhornIters
	for _, g := range m.Graphs {
		v := newView(t, g)
		bad := 0
		for l := 0; l < 40; l++ {
			for _, which := range []string{"attn", "ffn"} {
				n := through(v.one(t, "probe", fmt.Sprintf("L%d.hc_%s_comb", l, which)))
				var seq []int64
				for n.Op == "div" {
					s := n.Args[1]
					if s.Op != "add_scalar" || s.Args[0].Op != "sum" {
						t.Fatalf("%s L%d %s: div by %s, want add_scalar(sum)", g.Name, l, which, s.Op)
					}
					if s.Args[0].Args[0] != n.Args[0] {
						t.Fatalf("%s L%d %s: div normalises by the sum of another tensor", g.Name, l, which)
					}
					seq = append(seq, s.Args[0].Attrs.Int("axis", 0))
					n = n.Args[0]
				}
				// seq runs from the last step backwards.
				rows, cols := 0, 0
				ok := len(seq) == 2*it-1 && n.Op == "add_scalar" && n.Args[0].Op == "softmax"
				for i, ax := range seq {
					switch {
					case ax == -2 && i%2 == 0:
						cols++
					case ax == -1 && i%2 == 1:
						rows++
					default:
						ok = false
					}
				}
				if !ok || rows != it-1 || cols != it {
					bad++
					if bad < 4 {
						t.Errorf("%s L%d %s: %d row and %d column steps (sequence %v, start %s), want %d and %d alternating, ending on a column step",
							g.Name, l, which, rows, cols, seq, n.Op, it-1, it)
					}
				}
			}
		}
		if bad == 0 {
			t.Logf("%s: 80 combs × (%d column + %d row) steps", g.Name, it, it-1)
		}
	}
}

func TestReleaseDecodeShapes(t *testing.T) {
	m := releaseModule(t)
	want := map[string]string{"prefill": "i64[B,S]", "decode": "i64[B,1]", "chunk": "i64[B,S]"}
	for _, g := range m.Graphs {
		v := newView(t, g)
		tok := v.one(t, "input", "tokens")
		if got := tok.Type.String(); got != want[g.Name] {
			t.Errorf("%s: tokens %s, want %s", g.Name, got, want[g.Name])
		}
		if sp := v.one(t, "input", "start_pos"); len(sp.Type.Shape) != 0 || sp.Type.DType != ir.I64 {
			t.Errorf("%s: start_pos %s, want an i64 scalar", g.Name, sp.Type)
		}
		if len(g.Outputs) != 1 || g.Outputs[0].Name != "logits" {
			t.Fatalf("%s: outputs %v, want logits", g.Name, g.Outputs)
		}
		lt := g.Outputs[0].Node.Type
		wantL := map[string]string{"prefill": "f32[B,S,129280]", "decode": "f32[B,1,129280]", "chunk": "f32[B,S,129280]"}[g.Name]
		if lt.String() != wantL {
			t.Errorf("%s: logits %s, want %s", g.Name, lt, wantL)
		}
		// The graphs declare the same weights and the same state.
		if g.Name != "prefill" {
			pv := newView(t, m.Graph("prefill"))
			for name, ns := range v.byName {
				if ns[0].Op != "weight" && ns[0].Op != "state" {
					continue
				}
				if len(pv.byName[name]) == 0 || pv.byName[name][0].Type.String() != ns[0].Type.String() {
					t.Errorf("decode %s %s has no prefill twin of the same type", ns[0].Op, name)
				}
			}
		}
	}
}
