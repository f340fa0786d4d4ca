package tests

// The load test of serve: 16 concurrent streaming clients, a fixed number of
// greedy requests each, on the tiny model (cpu backend, loopback). Every
// answer must equal the same request run alone through the server, no
// stream may be lost or mixed with another, /metrics must count them, and
// the heap must stay bounded. Throughput against one stream and the p50/p99
// latencies are logged; BenchmarkServe16StreamsSpeedup checks the issue's
// acceptance figure (aggregate >= 4x one stream).

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

const (
	loadClients   = 16
	loadRequests  = 2  // each client's, one after the other
	loadMaxTokens = 24 // per request
)

// loadPrompt is request r of client c: every one different.
func loadPrompt(c, r int) string {
	return fmt.Sprintf("Client %d, question %d: what comes after %d?", c, r, 7*c+r)
}

// loadRound runs every client's requests: one at a time when alone, else
// the clients concurrently; it returns the results by client and request
// and the wall time.
func loadRound(t testing.TB, fx *serveFixture, alone bool) ([][]streamResult, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res := make([][]streamResult, loadClients)
	errs := make([]error, loadClients)
	client := func(c int) {
		res[c] = make([]streamResult, loadRequests)
		for r := range loadRequests {
			got, err := streamChat(ctx, fx, loadPrompt(c, r), loadMaxTokens)
			if err == nil && got.status != 200 {
				err = fmt.Errorf("status %d: %s", got.status, got.errBody)
			}
			if err != nil {
				errs[c] = fmt.Errorf("client %d request %d: %v", c, r, err)
				return
			}
			res[c][r] = got
		}
	}
	t0 := time.Now()
	if alone {
		for c := range loadClients {
			client(c)
		}
	} else {
		var wg sync.WaitGroup
		for c := range loadClients {
			wg.Go(func() { client(c) })
		}
		wg.Wait()
	}
	wall := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return res, wall
}

// loadStats sums the tokens of a round and gives its latency percentiles.
type loadStats struct {
	tokens                       int
	ttft50, ttft99, lat50, lat99 time.Duration
}

func statsOf(res [][]streamResult) loadStats {
	var s loadStats
	var ttft, lat []time.Duration
	for _, rs := range res {
		for _, r := range rs {
			s.tokens += r.tokens
			ttft = append(ttft, r.ttft)
			lat = append(lat, r.total)
		}
	}
	s.ttft50, s.ttft99 = percentile(ttft, 50), percentile(ttft, 99)
	s.lat50, s.lat99 = percentile(lat, 50), percentile(lat, 99)
	return s
}

// percentile is the p-th percentile of d (nearest rank).
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	i := (p*len(d)+99)/100 - 1
	return d[max(i, 0)]
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func TestServeLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	fx := startServe(t, serveOpts{slots: loadClients, queue: 2 * loadClients})
	alone, wallAlone := loadRound(t, fx, true)
	before := serveMetrics(t, fx)
	heap0 := heapInUse()
	together, wall := loadRound(t, fx, false)
	heap1 := heapInUse()
	after := serveMetrics(t, fx)

	// Every answer equals its request's alone, greedy.
	for c := range loadClients {
		for r := range loadRequests {
			a, b := alone[c][r], together[c][r]
			if a.text != b.text || a.finish != b.finish || a.tokens != b.tokens {
				t.Errorf("client %d request %d: alone %q (%s, %d tokens), with 15 others %q (%s, %d tokens)",
					c, r, a.text, a.finish, a.tokens, b.text, b.finish, b.tokens)
			}
			if b.tokens <= 0 || b.chunks == 0 {
				t.Errorf("client %d request %d: %d tokens in %d chunks", c, r, b.tokens, b.chunks)
			}
		}
	}
	// Distinct prompts give distinct streams: two identical answers would
	// hide a mix-up (the greedy tiny model rarely repeats itself).
	seen := map[string]string{}
	for c := range loadClients {
		for r := range loadRequests {
			k := together[c][r].text
			if prev, ok := seen[k]; ok {
				t.Logf("client %d request %d answers as %s did: %q", c, r, prev, k)
			}
			seen[k] = fmt.Sprintf("client %d request %d", c, r)
		}
	}

	sa, st := statsOf(alone), statsOf(together)
	one := float64(sa.tokens) / wallAlone.Seconds()
	agg := float64(st.tokens) / wall.Seconds()
	t.Logf("one stream: %d tokens in %v: %.0f tokens/s; TTFT p50 %v p99 %v, latency p50 %v p99 %v",
		sa.tokens, wallAlone.Round(time.Millisecond), one, sa.ttft50, sa.ttft99, sa.lat50, sa.lat99)
	t.Logf("%d streams: %d tokens in %v: %.0f tokens/s (%.2fx one stream); TTFT p50 %v p99 %v, latency p50 %v p99 %v",
		loadClients, st.tokens, wall.Round(time.Millisecond), agg, agg/one, st.ttft50, st.ttft99, st.lat50, st.lat99)
	t.Logf("heap in use: %d MiB before the concurrent round, %d MiB after", heap0>>20, heap1>>20)
	if heap1 > heap0+64<<20 {
		t.Errorf("the heap grew from %d to %d MiB over %d requests", heap0>>20, heap1>>20, loadClients*loadRequests)
	}

	// /metrics counts the concurrent round exactly.
	n := loadClients * loadRequests
	if d := serveMetricDelta(before, after, metricRequests, `status="200"`, `endpoint="/v1/chat/completions"`); d != float64(n) {
		t.Errorf("%s 200 grew by %v over %d requests", metricRequests, d, n)
	}
	if d := serveMetricDelta(before, after, metricTokensOut); d != float64(st.tokens) {
		t.Errorf("%s grew by %v, the streams' usage says %d", metricTokensOut, d, st.tokens)
	}
	if v, _ := metricSum(after, metricActive); v != 0 {
		t.Errorf("%s %v after every request ended", metricActive, v)
	}
	if v, _ := metricSum(after, metricQueue); v != 0 {
		t.Errorf("%s %v after every request ended", metricQueue, v)
	}
}

// serveMetricDelta is how much metric name (its samples holding labels)
// grew from before to after.
func serveMetricDelta(before, after map[string]float64, name string, labels ...string) float64 {
	a, _ := metricSum(after, name, labels...)
	b, _ := metricSum(before, name, labels...)
	return a - b
}

// BenchmarkServe16StreamsSpeedup is the acceptance figure: the
// aggregate tokens/s of 16 concurrent greedy streams against one stream's,
// on the cpu backend (tokens/s-1, tokens/s-16 and x-one-stream reported;
// it fails below 4x).
func BenchmarkServe16StreamsSpeedup(b *testing.B) {
	fx := startServe(b, serveOpts{slots: loadClients, queue: 2 * loadClients})
	loadRound(b, fx, false) // warm up
	var one, agg float64
	for b.Loop() {
		m0 := serveMetrics(b, fx)
		alone, wa := loadRound(b, fx, true)
		m1 := serveMetrics(b, fx)
		together, wt := loadRound(b, fx, false)
		m2 := serveMetrics(b, fx)
		one += float64(statsOf(alone).tokens) / wa.Seconds()
		agg += float64(statsOf(together).tokens) / wt.Seconds()
		// Where the time goes: the engine's decode steps against the wall.
		for _, r := range []struct {
			what          string
			before, after map[string]float64
			wall          time.Duration
		}{{"alone", m0, m1, wa}, {"16 streams", m1, m2, wt}} {
			n := serveMetricDelta(r.before, r.after, "ds4_serve_step_seconds_count")
			sec := serveMetricDelta(r.before, r.after, "ds4_serve_step_seconds_sum")
			rows := serveMetricDelta(r.before, r.after, "ds4_serve_step_rows_sum")
			b.Logf("%s: %.0f decode steps of %.1f rows on average, %.2f ms each, %.0f%% of the wall %v",
				r.what, n, rows/n, 1e3*sec/n, 100*sec/r.wall.Seconds(), r.wall.Round(time.Millisecond))
		}
	}
	one, agg = one/float64(b.N), agg/float64(b.N)
	b.ReportMetric(one, "tokens/s-1")
	b.ReportMetric(agg, "tokens/s-16")
	b.ReportMetric(agg/one, "x-one-stream")
	if agg < 4*one {
		b.Errorf("16 streams give %.0f tokens/s, %.2fx one stream's %.0f: the issue asks for >= 4x", agg, agg/one, one)
	}
}

// TestServePerSlotEngine: a batch of one session per slot (cmd/serve's
// engine where the backends run no ragged rows, cuda) gives the ragged
// batch's greedy answers, with 4 concurrent streams on 2 slots (so slots
// are reused).
func TestServePerSlotEngine(t *testing.T) {
	const clients = 4
	answers := func(fx *serveFixture) []streamResult {
		out := make([]streamResult, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				r, err := streamChat(context.Background(), fx, loadPrompt(c, 0), 12)
				if err == nil && r.status != 200 {
					err = fmt.Errorf("status %d: %s", r.status, r.errBody)
				}
				out[c], errs[c] = r, err
			})
		}
		wg.Wait()
		for c, err := range errs {
			if err != nil {
				t.Fatalf("client %d: %v", c, err)
			}
		}
		return out
	}
	batch := answers(startServe(t, serveOpts{slots: 2, queue: clients}))
	lone := answers(startServe(t, serveOpts{slots: 2, queue: clients, perSlot: true}))
	for c := range clients {
		if a, b := batch[c], lone[c]; a.text != b.text || a.finish != b.finish || a.tokens != b.tokens || b.tokens <= 0 {
			t.Errorf("client %d: batch %q (%s, %d tokens), per slot %q (%s, %d tokens)", c, a.text, a.finish, a.tokens, b.text, b.finish, b.tokens)
		}
	}
}
