package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/tokenizer"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is what a Server serves and its limits.
type Config struct {
	Engine    Engine               // the batch (its Slots are the concurrent sequences)
	Tokenizer *tokenizer.Tokenizer // must hold the chat tokens (deepseekv4.BOSToken, EOSToken)
	ModelName string               // the "model" requests name (GET /v1/models lists it)
	Vocab     int                  // the model's vocabulary (token id prompts are checked against it; 0: the tokenizer's)
	MaxSeqLen int                  // positions of a slot: prompt + max_tokens must fit
	MaxQueue  int                  // requests waiting for a slot before 429 (0: 4 × slots)
	MaxTokens int                  // the largest max_tokens (0: MaxSeqLen)
	// PrefillTokens bounds the prompts that join one decode step on an
	// engine that prefills beside a step: requests join until their prompt
	// tokens reach it (at least one joins; 0: DefaultPrefillTokens). The
	// running streams wait for those prefills: a larger budget admits a
	// burst of requests in fewer, longer steps.
	PrefillTokens int
	// DefaultMaxTokens is a chat request's max_tokens when it gives none
	// (0: 256), cut to the room the prompt leaves; /v1/completions' is 16,
	// as OpenAI's.
	DefaultMaxTokens int
	RequestTimeout   time.Duration // per request, queue included (0: none)
	MaxBody          int64         // request body limit in bytes (0: 4 MiB)
	Thinking         bool          // chat requests think unless they set reasoning_effort "none"
	Logger           *log.Logger   // one line per request (nil: the standard logger)
}

// Server answers the OpenAI endpoints on one Engine.
type Server struct {
	cfg       Config
	tok       *tokenizer.Tokenizer
	bos, eos  int64
	thinkEnd  string
	chatStops []string
	metrics   *metrics
	sched     *scheduler
	mux       *http.ServeMux

	draining atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	kill     context.CancelCauseFunc
	killCtx  context.Context
	inflight atomic.Int64 // requests between queueing and their answer's end
	created  int64
	nextID   atomic.Uint64
}

// DefaultPrefillTokens is Config.PrefillTokens when it is 0: 16 prompts of
// the load test's ~25 tokens join one step on the tiny model, the running
// streams waiting ~40-50 ms (2 cores) in that step instead of ~4-9 ms in
// each of 8 steps.
const DefaultPrefillTokens = 512

// errKilled is the cause of the requests a forced shutdown cancels.
var errKilled = errors.New("server shut down")

// New checks cfg and starts the scheduler.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Tokenizer == nil {
		return nil, fmt.Errorf("serve: Config needs an Engine and a Tokenizer")
	}
	if cfg.Engine.Slots() <= 0 {
		return nil, fmt.Errorf("serve: the engine has %d slots", cfg.Engine.Slots())
	}
	if cfg.MaxSeqLen <= 1 {
		return nil, fmt.Errorf("serve: MaxSeqLen %d: must be > 1", cfg.MaxSeqLen)
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "ds4"
	}
	if cfg.Vocab == 0 {
		cfg.Vocab = cfg.Tokenizer.VocabSize()
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 4 * cfg.Engine.Slots()
	}
	if cfg.MaxTokens <= 0 || cfg.MaxTokens > cfg.MaxSeqLen {
		cfg.MaxTokens = cfg.MaxSeqLen
	}
	if cfg.PrefillTokens <= 0 {
		cfg.PrefillTokens = DefaultPrefillTokens
	}
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 256
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = log.Default()
	}
	s := &Server{cfg: cfg, tok: cfg.Tokenizer, thinkEnd: deepseekv4.ThinkEnd, chatStops: deepseekv4.ChatStops(), stop: make(chan struct{}), created: time.Now().Unix()}
	var ok bool
	if s.bos, ok = s.tok.ID(deepseekv4.BOSToken); !ok {
		return nil, fmt.Errorf("serve: the tokenizer has no token %q (begin of sentence)", deepseekv4.BOSToken)
	}
	if s.eos, ok = s.tok.ID(deepseekv4.EOSToken); !ok {
		return nil, fmt.Errorf("serve: the tokenizer has no token %q (end of sentence)", deepseekv4.EOSToken)
	}
	s.killCtx, s.kill = context.WithCancelCause(context.Background())
	s.metrics = newMetrics(cfg.Engine.Slots(), cfg.MaxQueue)
	s.sched = &scheduler{s: s, eng: cfg.Engine, queue: make(chan *seq, cfg.MaxQueue), active: make([]*seq, cfg.Engine.Slots()), done: make(chan struct{})}
	go s.sched.run(s.stop)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/v1/models", s.only(http.MethodGet, s.models))
	s.mux.HandleFunc("/v1/completions", s.only(http.MethodPost, s.completions))
	s.mux.HandleFunc("/v1/chat/completions", s.only(http.MethodPost, s.chatCompletions))
	s.mux.HandleFunc("/health", s.only(http.MethodGet, s.health))
	s.mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: 404, Message: "no endpoint " + r.URL.Path, Type: typeInvalid, Code: strp("unknown_url")})
	})
	return s, nil
}

// Handler is the server's HTTP handler: every request logged on one line
// and counted by endpoint and status.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		s.mux.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(endpoint(r.URL.Path), fmt.Sprint(sw.status)).Inc()
		tokens := ""
		if sw.prompt > 0 || sw.completion > 0 {
			tokens = fmt.Sprintf(" tokens %d+%d", sw.prompt, sw.completion)
		}
		if sw.outcome != "" {
			tokens += " " + sw.outcome
		}
		s.cfg.Logger.Printf("%s %s %s %d %dB %.3fs%s", r.RemoteAddr, r.Method, r.URL.Path, sw.status, sw.bytes, time.Since(t0).Seconds(), tokens)
	})
}

// endpoint is the metrics label of a path: the known ones, else "other"
// (unbounded labels would grow the registry).
func endpoint(path string) string {
	switch path {
	case "/v1/models", "/v1/completions", "/v1/chat/completions", "/health", "/metrics":
		return path
	}
	return "other"
}

// Shutdown stops accepting requests (503), waits for the in-flight ones
// until ctx ends, then cancels those left (their streams end with an
// error; a handler stuck writing to a stalled client is waited for one
// second at most) and stops the scheduler. It returns ctx's error when it had to
// cancel.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	var err error
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.inflight.Load() > 0 && err == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
			err = ctx.Err()
			s.kill(errKilled)
		}
	}
	// Cancelled handlers return at once, except one blocked writing to a
	// client that does not read: wait a moment for them, not forever (the
	// scheduler no longer needs them; closing the connections ends them).
	for grace := time.After(time.Second); s.inflight.Load() > 0; {
		select {
		case <-tick.C:
			continue
		case <-grace:
		}
		break
	}
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.sched.done
	return err
}

// Close cancels every request at once and stops the scheduler.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Shutdown(ctx)
	return nil
}

// only answers 405 to a method other than m.
func (s *Server) only(m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", m)
			writeError(w, &apiError{Status: 405, Message: r.Method + " " + r.URL.Path + ": use " + m, Type: typeInvalid, Code: strp("method_not_allowed")})
			return
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"shutting down"}`+"\n")
		return
	}
	io.WriteString(w, `{"status":"ok"}`+"\n")
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, modelList{Object: "list", Data: []modelCard{{ID: s.cfg.ModelName, Object: "model", Created: s.created, OwnedBy: "ds4"}}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// decode reads r's JSON body into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return invalid("", "", "the request body is empty: want a JSON object")
		}
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "", "the request body holds more than one JSON value")
	}
	return nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := s.chatJob(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.answer(w, r, j, req.Model)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := s.completionJob(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.answer(w, r, j, req.Model)
}

// answer queues j and writes its answer, streamed or whole.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, j *job, model string) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	if s.draining.Load() {
		writeError(w, unavailable())
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stopKill := context.AfterFunc(s.killCtx, func() { cancel(errKilled) })
	defer stopKill()
	if s.cfg.RequestTimeout > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer c()
	}
	q := newSeq(ctx, j)
	q.queue = time.Now()
	if !s.sched.submit(q) {
		writeError(w, &apiError{Status: http.StatusTooManyRequests, Message: fmt.Sprintf("the queue is full (%d requests waiting): retry later", s.cfg.MaxQueue), Type: typeOverloaded, Code: strp("queue_full")})
		return
	}
	s.metrics.promptTokens.Add(float64(len(j.prompt)))
	a := &reply{s: s, w: w, j: j, model: model, id: s.newID(j.chat), created: time.Now().Unix(),
		lost: func(err error) { cancel(fmt.Errorf("writing to the client: %w", err)) }}
	if sw, ok := w.(*statusWriter); ok {
		sw.prompt = len(j.prompt)
		defer func() { sw.completion, sw.outcome = a.completion, a.outcome }()
	}
	for {
		select {
		case <-q.out.notify:
		case <-ctx.Done():
			// The scheduler frees the slot at its next step; the answer
			// does not wait for it.
			a.fail(ctxError(ctx))
			return
		}
		for _, ev := range q.out.take() {
			if ev.err != nil {
				a.fail(ev.err)
				return
			}
			a.add(ev)
			if ev.finish != "" {
				a.done(ev)
				return
			}
		}
	}
}

// newID is a response id, unique in this server's life.
func (s *Server) newID(chat bool) string {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	return fmt.Sprintf("%s%x-%d", prefix, s.created, s.nextID.Add(1))
}

// statusWriter records the status and size of a response for the log and
// the metrics; it keeps Flush for the event streams.
type statusWriter struct {
	http.ResponseWriter
	status             int
	bytes              int
	prompt, completion int
	outcome            string // the finish reason, or the error that ended the answer
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logf(format string, args ...any) { s.cfg.Logger.Printf(format, args...) }
