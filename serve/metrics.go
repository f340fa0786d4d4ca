package serve

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus series, on the server's own
// registry (GET /metrics).
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec
	promptTokens     prometheus.Counter
	completionTokens prometheus.Counter
	ttft, itl        prometheus.Histogram
	stepSeconds      prometheus.Histogram
	stepRows         prometheus.Histogram
	stepFailures     prometheus.Counter
	queueDepth       prometheus.Gauge
	active, slots    prometheus.Gauge
}

// latencyBuckets span a tiny model's milliseconds to a large one's seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 18)

func newMetrics(slots, queue int) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ds4_serve_requests_total",
			Help: "HTTP requests answered, by endpoint and status code."}, []string{"endpoint", "status"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "ds4_serve_prompt_tokens_total",
			Help: "Prompt tokens of the requests admitted."}),
		completionTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "ds4_serve_completion_tokens_total",
			Help: "Tokens generated."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ds4_serve_time_to_first_token_seconds",
			Help: "From a request's arrival in the queue to its first token.", Buckets: latencyBuckets}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ds4_serve_inter_token_latency_seconds",
			Help: "Between two tokens of one sequence.", Buckets: latencyBuckets}),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ds4_serve_step_seconds",
			Help: "Duration of one decode step of the batch.", Buckets: latencyBuckets}),
		stepRows: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ds4_serve_step_rows",
			Help: "Sequences decoded by one step.", Buckets: prometheus.LinearBuckets(1, 1, max(slots, 1))}),
		stepFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "ds4_serve_engine_failures_total",
			Help: "Prefill or decode calls that failed (their requests answered 500)."}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ds4_serve_queue_depth",
			Help: "Requests waiting for a slot."}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ds4_serve_active_slots",
			Help: "Slots holding a sequence (batch occupancy)."}),
		slots: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ds4_serve_slots",
			Help: "Slots of the batch."}),
	}
	m.slots.Set(float64(slots))
	queueCap := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ds4_serve_queue_capacity", Help: "Requests the queue holds before 429."})
	queueCap.Set(float64(queue))
	m.reg.MustRegister(m.requests, m.promptTokens, m.completionTokens, m.ttft, m.itl, m.stepSeconds, m.stepRows,
		m.stepFailures, m.queueDepth, m.active, m.slots, queueCap)
	return m
}
