package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Run runs fn(i) for i in [0, n) on up to GOMAXPROCS goroutines (the
// caller's included) that pull indices from a shared counter. The helpers
// are the persistent workers of the pool (see pool) when it is free, else
// fresh goroutines.
func Run(n int, fn func(i int)) {
	p := min(runtime.GOMAXPROCS(0), n)
	if p <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	if pool.mu.TryLock() {
		defer pool.mu.Unlock()
		runPool(p-1, n, fn)
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for range p - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// pool is a set of persistent helper goroutines for Run. A call
// publishes its job (job, then seq); the helpers spin for a while after each
// job, watching seq, so that the next of the many small calls of a
// decode step starts without waking a parked thread, and then park on their
// wake channel. The caller runs tasks too and waits until every task of its
// job has finished; a helper that comes late to a job finds no task left.
var pool struct {
	mu      sync.Mutex // held by the parallel call that owns the helpers
	job     atomic.Pointer[poolJob]
	seq     atomic.Uint64
	workers []*poolWorker // grown under mu
}

// poolSpin is how long a helper watches for the next job before parking.
const poolSpin = 200 * time.Microsecond

type poolJob struct {
	fn         func(i int)
	n          int64
	next, done atomic.Int64
}

func (j *poolJob) work() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.n {
			return
		}
		j.fn(int(i))
		j.done.Add(1)
	}
}

type poolWorker struct {
	asleep atomic.Bool
	wake   chan struct{}
}

func (w *poolWorker) loop(last uint64) {
	for {
		s := pool.seq.Load()
		if s == last {
			t0 := time.Now()
			for i := 0; s == last; i++ {
				if i&63 == 63 {
					if time.Since(t0) > poolSpin {
						break
					}
					runtime.Gosched()
				}
				s = pool.seq.Load()
			}
			if s == last {
				w.asleep.Store(true)
				if s = pool.seq.Load(); s == last {
					<-w.wake
					s = pool.seq.Load()
				} else if !w.asleep.CompareAndSwap(true, false) {
					<-w.wake // the publisher cleared the flag and sends
				}
			}
		}
		last = s
		if j := pool.job.Load(); j != nil {
			j.work()
		}
	}
}

// runPool runs a job on the caller and `helpers` pool workers; pool.mu is
// held.
func runPool(helpers, n int, fn func(i int)) {
	for len(pool.workers) < helpers {
		w := &poolWorker{wake: make(chan struct{}, 1)}
		pool.workers = append(pool.workers, w)
		go w.loop(pool.seq.Load())
	}
	j := &poolJob{fn: fn, n: int64(n)}
	pool.job.Store(j)
	pool.seq.Add(1)
	for _, w := range pool.workers[:helpers] {
		if w.asleep.Load() && w.asleep.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	j.work()
	for i := 0; j.done.Load() < j.n; i++ {
		if i&15 == 15 {
			runtime.Gosched()
		}
	}
	pool.job.Store(nil)
}
