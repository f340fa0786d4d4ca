//go:build !linux

package safetensors

// adviseHugePages is a no-op where MADV_HUGEPAGE does not exist.
func adviseHugePages([]byte) {}
