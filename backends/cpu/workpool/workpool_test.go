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
