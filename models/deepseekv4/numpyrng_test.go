package deepseekv4

import (
	"reflect"
	"testing"
)

func TestNumpyIntegersAppendixA(t *testing.T) {
	const bound = 46539438283891
	for seed, want := range map[uint64][]int64{
		10007:      {38316048023122, 2419938046656, 17979836159674, 36993668729195},
		10007 * 14: {33858405369630, 25755403400457, 15460673601360, 41309613242795},
	} {
		if got := NumpyIntegers(seed, 0, bound, 4); !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: got %v, want %v", seed, got, want)
		}
	}
}

func TestNumpyIntegersRanges(t *testing.T) {
	// Degenerate range: no draws, all low.
	if got := NumpyIntegers(5, 7, 8, 3); !reflect.DeepEqual(got, []int64{7, 7, 7}) {
		t.Errorf("got %v", got)
	}
	// 32-bit path (buffered halves of 64-bit draws) and 64-bit path stay in range.
	for _, hi := range []int64{10, 1 << 31, 1 << 32, 1 << 33, 1 << 62} {
		for _, v := range NumpyIntegers(123, -3, hi, 50) {
			if v < -3 || v >= hi {
				t.Fatalf("value %d out of [-3, %d)", v, hi)
			}
		}
	}
	// next32 consumes one 64-bit draw per two values.
	a, b := newPCG64(42), newPCG64(42)
	x := b.next64()
	if lo, hi := a.next32(), a.next32(); lo != uint32(x) || hi != uint32(x>>32) {
		t.Errorf("next32 halves %x %x of %x", lo, hi, x)
	}
	if a.next64() != b.next64() {
		t.Error("streams diverged")
	}
}
