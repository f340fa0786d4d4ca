// Package backends is the contract between the engine and the executors of
// IR graphs, and the registry of those executors. Backends register from
// init(), like database/sql drivers; commands pick one by name.
//
// The contract (backend.go, device.go): a Backend says whether it can run
// here (Available), what it runs (Capabilities, as data) and opens a
// Device, which owns its buffers, binds weights in its own layout, makes
// state, arenas and tables, prepares Segments into Programs, launches them
// asynchronously and Syncs. Schedule (segment.go) places a graph's nodes on
// a backend and its fallbacks by capability and cuts it into segments;
// Runner (runner.go) runs the segments of a call, moving the values that
// cross a boundary. HostDevice (host.go) is the Device of backends whose
// buffers are *Tensor in host memory. Rows at different positions in one
// call (rows.go): RowWise classifies a graph's nodes into per-row and
// batched ones, and Runner.RunRows runs a ragged call on devices that
// implement RowDevice (the host devices; not cuda yet).
package backends
