package workpool

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRun checks that every index runs exactly once, for sequential,
// concurrent and nested calls, with the helpers spinning or parked.
func TestRun(t *testing.T) {
	check := func(n int, nested bool) {
		hits := make([]atomic.Int32, n)
		Run(n, func(i int) {
			hits[i].Add(1)
			if nested && i%7 == 0 {
				var c atomic.Int32
				Run(5, func(int) { c.Add(1) })
				if c.Load() != 5 {
					t.Errorf("nested run: %d of 5", c.Load())
				}
			}
		})
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, h)
			}
		}
	}
	for n := range 40 {
		check(n, false)
	}
	time.Sleep(2 * poolSpin) // helpers park
	check(100, false)
	check(100, true)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				check(n%50, n%3 == 0)
			}
		}()
	}
	wg.Wait()
}

// TestInline: while Inline is held every index runs on the caller's
// goroutine, in order; after release Run forks again.
func TestInline(t *testing.T) {
	release := Inline()
	var order []int
	Run(64, func(i int) { order = append(order, i) }) // a data race unless inline
	release()
	release() // a second release is a no-op
	for i, v := range order {
		if v != i {
			t.Fatalf("inline run: index %d ran at %d", v, i)
		}
	}
	if len(order) != 64 || inline.Load() != 0 {
		t.Fatalf("%d indices, %d holders", len(order), inline.Load())
	}
	var c atomic.Int32
	Run(64, func(int) { c.Add(1) })
	if c.Load() != 64 {
		t.Fatalf("after release: %d of 64", c.Load())
	}
}

// TestLanes: every index runs once, on a lane below the width, the calls of
// one lane never at once; a Run inside runs on its caller's goroutine, and
// so does a Lanes inside (as lane 0).
func TestLanes(t *testing.T) {
	for _, width := range []int{1, 2, 3, 8} {
		for n := range 20 {
			hits := make([]atomic.Int32, n)
			var busy [8]atomic.Int32
			Lanes(n, width, func(lane, i int) {
				if lane < 0 || lane >= width {
					t.Errorf("width %d: lane %d", width, lane)
					return
				}
				if busy[lane].Add(1) != 1 {
					t.Errorf("width %d: two calls of lane %d at once", width, lane)
				}
				var order []int
				Run(16, func(k int) { order = append(order, k) }) // a data race unless inline
				if len(order) != 16 {
					t.Errorf("nested run: %d of 16", len(order))
				}
				inner := 0
				Lanes(3, width, func(l, _ int) {
					if l != 0 {
						t.Errorf("nested lanes: lane %d", l)
					}
					inner++
				})
				if inner != 3 {
					t.Errorf("nested lanes: %d of 3", inner)
				}
				hits[i].Add(1)
				busy[lane].Add(-1)
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("width %d, n=%d: index %d ran %d times", width, n, i, h)
				}
			}
		}
	}
	if lanes.Load() != 0 {
		t.Fatalf("%d Lanes calls still counted", lanes.Load())
	}
	var c atomic.Int32
	Run(64, func(int) { c.Add(1) })
	if c.Load() != 64 {
		t.Fatalf("after Lanes: %d of 64", c.Load())
	}
}
