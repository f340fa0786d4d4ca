package backendtest

// Released are the widths of the released model
// (models/deepseekv4/testdata/configs/deepseek-v41-flash.json; a test
// checks them against the file). The cases use them where a kernel's
// tiling, blocking or vector width depends on them, and keep the other
// dimensions (tokens, experts stacked, table rows) small so that the whole
// suite runs in seconds on two cores.
var Released = struct {
	Dim, Heads, HeadDim, RopeDim, QLora, OGroups, OLora int
	Experts, Active, Inter                              int
	IdxHeads, IdxDim, IdxTopK, Window                   int
	HC, SinkhornIters                                   int
	EngHeads, EngDim, EngNgram, EngCompressedVocab      int
	CandBlock, CandTopK, Vocab, OriginalSeqLen          int
	NormEps, HCEps, SwiGLULimit, RouteScale             float64
	RopeTheta, CompressRopeTheta, RopeFactor, BetaFast  float64
	BetaSlow                                            float64
}{
	Dim: 5120, Heads: 64, HeadDim: 512, RopeDim: 64, QLora: 1280, OGroups: 8, OLora: 1024,
	Experts: 384, Active: 6, Inter: 2304,
	IdxHeads: 32, IdxDim: 128, IdxTopK: 512, Window: 128,
	HC: 4, SinkhornIters: 20,
	EngHeads: 8, EngDim: 256, EngNgram: 4, EngCompressedVocab: 99092,
	CandBlock: 8, CandTopK: 2048, Vocab: 129280, OriginalSeqLen: 65536,
	NormEps: 1e-20, HCEps: 1e-6, SwiGLULimit: 10, RouteScale: 1.5,
	RopeTheta: 10000, CompressRopeTheta: 160000, RopeFactor: 16, BetaFast: 32,
	BetaSlow: 1,
}
