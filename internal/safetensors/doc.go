// Package safetensors reads and writes the Hugging Face safetensors format.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON header
// (a map from tensor name to {"dtype", "shape", "data_offsets"} plus an
// optional "__metadata__" string map), then the data area. data_offsets are
// [begin, end) relative to the start of the data area.
//
// Open memory-maps a regular file read-only (a directory, device or FIFO
// is refused without blocking: internal/fileio.Open) (at a 2 MiB-aligned address with
// MADV_HUGEPAGE, so that 2 MiB page-cache folios map as huge pages: see
// mapFile) and validates it strictly: the header
// length is within bounds, the JSON is valid, every dtype is known, shapes
// are non-negative, each tensor's byte size equals its offset span, offsets
// lie inside the data area, tensors do not overlap and cover the data area
// exactly (no gaps, no trailing bytes). Every error names the file and,
// where relevant, the tensor and the absolute byte offset (see *Error).
//
// OpenDir opens a checkpoint directory (sharded through
// model.safetensors.index.json, or single/multiple model*.safetensors files)
// as one *Set. Tensor.Data slices alias the mapping and are valid until the
// File or Set is closed.
//
// WriteFile writes a file through internal/fileio.WriteFile (a regular
// file replaced atomically, a device written in place) with tensors sorted
// by name and the header padded with spaces to a multiple of 8 bytes.
package safetensors
