// Package synth writes random checkpoints in the released DeepSeek-V4.1
// format for any valid config: config.json (flat ModelArgs), sharded
// safetensors with model.safetensors.index.json, and the Engram token map.
// The tensor list comes from the weight declarations of the prefill graph,
// so every tensor the engine binds is written, with the dtype and shape it
// checks.
//
// Values follow the recipe of the golden checkpoint (testdata/tiny):
// matrices N(0, gain/sqrt(in)) quantised into their storage format, norms
// near 1, small hc_fn, with output gains that keep each layer's update a
// fraction of the residual stream. Tensors are generated in chunks by
// several goroutines and written in place (pwrite at offsets known from the
// header), so memory stays small whatever the checkpoint size.
//
// Source generates the same bytes in memory instead, weight by weight as
// the engine binds them (engine.OpenSource; exec -bench -synthetic), so a
// benchmark on a bare machine needs no checkpoint on disk.
//
//	c, _ := deepseekv4.LoadConfig("bench/configs/mini.json")
//	rep, err := synth.Generate("/tmp/mini", c, 1, synth.Options{})
//	fmt.Println(rep) // bytes, tensors, shards, MB/s
package synth
