package passes

import (
	"fmt"

	"github.com/ds4go/ds4/ir"
)

// PipelineStats is what the pipeline did to a module, in the JSON form of
// the compile report.
type PipelineStats struct {
	OpsBefore            map[string]int `json:"ops_before"` // op → count in the decode graph
	OpsAfter             map[string]int `json:"ops_after"`
	DecodeKernelsBefore  int            `json:"decode_kernels_before"`
	DecodeKernelsAfter   int            `json:"decode_kernels_after"`
	PeakActivationBytes  int64          `json:"peak_activation_bytes"`  // prefill graph, first-fit arena
	NaiveActivationBytes int64          `json:"naive_activation_bytes"` // prefill graph, every value its own buffer
	// RowsPerLayer is LayerRows of the prefill graph for the prompt: the
	// rows each layer computes when only the last logits and the caches
	// are wanted (bounded replay, BoundedRows); every row without the pass.
	RowsPerLayer []int64 `json:"rows_per_layer"`
	// PromptRows is RowsPerLayer summed, against PromptTokens × layers.
	PromptRows   int64 `json:"prompt_rows"`
	PromptTokens int   `json:"prompt_tokens"`
}

// IsKernel reports whether a node launches work: not a source, not a probe,
// not a pure view (reshape).
func IsKernel(n *ir.Node) bool {
	info := n.Info()
	return info != nil && !info.Has(ir.Source) && n.Op != "probe" && n.Op != "reshape"
}

// CountKernels counts the kernel nodes of a graph (see IsKernel).
func CountKernels(g *ir.Graph) int {
	k := 0
	for _, n := range g.Nodes {
		if IsKernel(n) {
			k++
		}
	}
	return k
}

// Stats compares the decode graphs of a module before and after the
// pipeline and plans the memory of the prefill graph after it for a call of
// batch rows of tokens tokens (maximum length tokens, start position 0).
func Stats(before, after *ir.Module, batch, tokens int) (PipelineStats, error) {
	var st PipelineStats
	db, da := before.Graph("decode"), after.Graph("decode")
	if db == nil || da == nil {
		return st, fmt.Errorf("stats: the modules need a decode graph")
	}
	st.OpsBefore, st.OpsAfter = db.OpCounts(), da.OpCounts()
	st.DecodeKernelsBefore, st.DecodeKernelsAfter = CountKernels(db), CountKernels(da)
	pg := after.Graph("prefill")
	if pg == nil {
		return st, fmt.Errorf("stats: the module needs a prefill graph")
	}
	plan, err := PlanMemory(pg, Bindings{B: int64(batch), S: int64(tokens), M: int64(tokens)})
	if err != nil {
		return st, err
	}
	st.PeakActivationBytes, st.NaiveActivationBytes = plan.PeakBytes, plan.NaiveBytes
	st.RowsPerLayer, st.PromptTokens = LayerRows(pg, int64(tokens)), tokens
	for _, r := range st.RowsPerLayer {
		st.PromptRows += r
	}
	return st, nil
}
