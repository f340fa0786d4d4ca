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
// fresh goroutines. Inside Lanes, or while Inline is held, it runs on the
// caller's goroutine.
func Run(n int, fn func(i int)) {
	p := min(Width(), n)
	if p <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	j := newJob(n, p)
	j.fn = fn
	runJob(j, p)
}

// Width is the number of goroutines a Run would use now: 1 inside Lanes or
// while Inline is held, else GOMAXPROCS (which takes the runtime's
// scheduler lock: asked only when it matters, it is not contended by the
// lanes' many small parallel sections).
func Width() int {
	if inline.Load() > 0 || lanes.Load() > 0 {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// Lanes runs fn(lane, i) for i in [0, n), each once, on up to width
// goroutines (at most GOMAXPROCS: the caller's, lane 0, and the pool's
// helpers, lanes 1, 2, …) that take the indices in order from one shared
// counter; a lane's calls run one after the other, never two at once. While
// it runs, Run executes on its caller's goroutine (the lanes keep the cores
// busy). It is for engine.Batch's side-by-side calls (a ragged step's row
// groups, prefills of different slots): the helpers take their lanes while
// they spin after the last job, where a goroutine started for each call
// waited for an idle core's thread to wake (0.4 ms in the median, often
// 3 ms, on a 2-vCPU VM, while the caller ran its own lane). A Lanes inside
// Lanes, or under Inline, runs on the caller's goroutine as lane 0.
func Lanes(n, width int, fn func(lane, i int)) {
	p := min(width, runtime.GOMAXPROCS(0), n)
	nested := lanes.Add(1) > 1
	defer lanes.Add(-1)
	if p <= 1 || nested || inline.Load() > 0 {
		for i := range n {
			fn(0, i)
		}
		return
	}
	j := newJob(n, 1)
	j.lane = fn
	runJob(j, p)
}

// runJob runs j on the caller (worker 0) and p-1 helpers: the pool's when
// it is free, else fresh goroutines.
func runJob(j *poolJob, p int) {
	j.width = p
	if pool.mu.TryLock() {
		defer pool.mu.Unlock()
		runPool(p-1, j)
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < p; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.work(w)
		}()
	}
	j.work(0)
	wg.Wait()
}

// inline counts the holders of Inline; lanes the Lanes calls running.
var inline, lanes atomic.Int32

// Inline makes every Run execute on its caller's goroutine until release
// is called (holders are counted; release once). A caller that keeps every
// core busy with goroutines of its own (engine.Batch's concurrent row
// groups and prefills) holds it, so that the kernels inside neither fork
// onto cores that are taken nor leave the pool's helpers spinning on them:
// the helpers park at once while it is held.
func Inline() (release func()) {
	inline.Add(1)
	var once sync.Once
	return func() { once.Do(func() { inline.Add(-1) }) }
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
// Waking a parked helper took 50–100 µs on the 2-vCPU machine this was
// tuned on, and the serial stretches between a decode step's parallel
// sections reach a few hundred µs: at 200 µs the helpers parked ~300 times
// per 16 decode steps (mean start latency 10 µs per job), at 1 ms ~20
// (1.5 µs). The spin does not yield (runtime.Gosched cost microseconds
// there); it burns at most this long after the last job.
const poolSpin = 1 * time.Millisecond

type poolJob struct {
	fn    func(i int)
	lane  func(w, i int) // (Lanes) w: the worker running index i; fn is nil
	width int            // workers 0..width-1 take part (a helper beyond comes late)
	n     int64
	parts []jobPart
	done  atomic.Int64
}

// jobPart is one worker's contiguous share of a job's indices. A worker
// runs its own share in order, then helps with the others': each worker
// streams through adjacent indices (adjacent weight rows, for the matmuls),
// which the hardware prefetchers follow better than indices interleaved
// between workers.
type jobPart struct {
	next atomic.Int64
	end  int64
	_    [48]byte // keep the parts' counters on separate cache lines
}

// newJob is a job of n indices cut into parts contiguous shares (one per
// worker; one part: every worker takes the next index of all); the caller
// sets its fn or lane.
func newJob(n, parts int) *poolJob {
	j := &poolJob{n: int64(n), parts: make([]jobPart, parts)}
	for w := range j.parts {
		j.parts[w].next.Store(int64(n * w / parts))
		j.parts[w].end = int64(n * (w + 1) / parts)
	}
	return j
}

// work runs indices of the job, starting with worker w's share.
func (j *poolJob) work(w int) {
	if w >= j.width {
		return
	}
	for k := range j.parts {
		part := &j.parts[(w+k)%len(j.parts)]
		for {
			i := part.next.Add(1) - 1
			if i >= part.end {
				break
			}
			if j.fn != nil {
				j.fn(int(i))
			} else {
				j.lane(w, int(i))
			}
			j.done.Add(1)
		}
	}
}

type poolWorker struct {
	id     int // 1, 2, …: the share of a job it starts with (the caller has 0)
	asleep atomic.Bool
	wake   chan struct{}
}

func (w *poolWorker) loop(last uint64) {
	for {
		s := pool.seq.Load()
		if s == last {
			t0 := time.Now()
			for i := 0; s == last; i++ {
				if i&1023 == 1023 && (time.Since(t0) > poolSpin || inline.Load() > 0) {
					break
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
			j.work(w.id)
		}
	}
}

// runPool runs j on the caller and `helpers` pool workers; pool.mu is
// held.
func runPool(helpers int, j *poolJob) {
	for len(pool.workers) < helpers {
		w := &poolWorker{id: len(pool.workers) + 1, wake: make(chan struct{}, 1)}
		pool.workers = append(pool.workers, w)
		go w.loop(pool.seq.Load())
	}
	pool.job.Store(j)
	pool.seq.Add(1)
	for _, w := range pool.workers[:helpers] {
		if w.asleep.Load() && w.asleep.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	j.work(0)
	for i := 0; j.done.Load() < j.n; i++ {
		if i&1023 == 1023 {
			runtime.Gosched()
		}
	}
	pool.job.Store(nil)
}
