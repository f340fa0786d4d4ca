package tests

// Shared pieces of the serve tests: the server on a loopback listener over
// testdata/tiny, a raw streaming client, and /metrics read back.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/plan"
	"github.com/ds4go/ds4/serve"
	"github.com/ds4go/ds4/tokenizer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// serveOpts sizes a test server.
type serveOpts struct {
	slots, queue, maxLen, maxTokens int
	timeout                         time.Duration
	// wrap, when set, wraps the engine (to inject failures).
	wrap func(serve.Engine) serve.Engine
	// perSlot: one session per slot even though the batch could be ragged
	// (cmd/serve's engine on cuda, run here on cpu).
	perSlot bool
	// prefillTokens is serve.Config.PrefillTokens (0: the default).
	prefillTokens int
}

// The series of /metrics the tests read (serve/metrics.go).
const (
	metricRequests  = "ds4_serve_requests_total"
	metricTokensOut = "ds4_serve_completion_tokens_total"
	metricActive    = "ds4_serve_active_slots"
	metricQueue     = "ds4_serve_queue_depth"
)

// The tiny model, opened once for every server of the test run (the tests
// run one server at a time).
var (
	serveModelOnce sync.Once
	serveModel     *engine.Model
	serveTok       *tokenizer.Tokenizer
	serveModelErr  error
)

// newServer builds a serve.Server over the tiny model on the cpu backend;
// closeFn cancels what is left and stops its scheduler.
func newServer(t testing.TB, o serveOpts) (srv *serve.Server, closeFn func()) {
	t.Helper()
	serveModelOnce.Do(func() {
		if buildErr != nil {
			serveModelErr = buildErr
			return
		}
		planPath := filepath.Join(binDir, "serve-tiny.plan")
		if b, err := exec.Command(filepath.Join(binDir, "compile"), "-model", tinyDir(), "-o", planPath).CombinedOutput(); err != nil {
			serveModelErr = fmt.Errorf("compile -model tiny: %v: %s", err, b)
			return
		}
		p, err := plan.Read(planPath)
		if err != nil {
			serveModelErr = err
			return
		}
		if serveTok, err = tokenizer.Load(filepath.Join(tinyDir(), "tokenizer.json")); err != nil {
			serveModelErr = err
			return
		}
		serveModel, serveModelErr = engine.Open(p.Module, tinyDir(), "cpu")
	})
	if serveModelErr != nil {
		t.Fatal(serveModelErr)
	}
	if o.maxLen == 0 {
		o.maxLen = 256
	}
	// As cmd/serve does: the engine's batch when its backends run rows at
	// different positions (cpu does), else one session per slot.
	var eng interface {
		serve.Engine
		Close() error
	}
	b, err := serveModel.NewBatch(engine.BatchOptions{Slots: o.slots, MaxLen: o.maxLen, PerSlot: o.perSlot})
	if err != nil {
		t.Fatal(err)
	}
	if b.Ragged() == o.perSlot {
		t.Fatalf("batch ragged %v, asked for one session per slot %v", b.Ragged(), o.perSlot)
	}
	eng = b
	serve.TuneGC() // as cmd/serve does once its engine is built
	var e serve.Engine = eng
	if o.wrap != nil {
		e = o.wrap(eng)
	}
	s, err := serve.New(serve.Config{
		Engine:         e,
		Tokenizer:      serveTok,
		ModelName:      "tiny",
		Vocab:          serveModel.Vocab,
		MaxSeqLen:      o.maxLen,
		MaxQueue:       o.queue,
		PrefillTokens:  o.prefillTokens,
		MaxTokens:      o.maxTokens,
		RequestTimeout: o.timeout,
		Logger:         log.New(io.Discard, "", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, func() {
		s.Close()
		eng.Close()
	}
}

// serveFixture is a running server and the model it serves.
type serveFixture struct {
	url   string // http://127.0.0.1:PORT
	model string // the id /v1/models lists
	srv   *serve.Server
}

// startServe runs serve over the tiny model (cpu backend) on a loopback
// listener until the test ends.
func startServe(t testing.TB, o serveOpts) *serveFixture {
	t.Helper()
	srv, closeFn := newServer(t, o)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		closeFn()
		ts.Close()
	})
	fx := &serveFixture{url: ts.URL, srv: srv}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	code, body := serveGet(t, fx, "/v1/models")
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Data) != 1 {
		t.Fatalf("GET /v1/models: %d %s", code, body)
	}
	fx.model = list.Data[0].ID
	return fx
}

// client is the official OpenAI Go client pointed at the server (no retries:
// a 429 must reach the test).
func (fx *serveFixture) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(fx.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// serveGet fetches path and returns the status and body.
func serveGet(t testing.TB, fx *serveFixture, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(fx.url + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// servePost posts body (raw bytes) to path and returns the status and body.
func servePost(t testing.TB, fx *serveFixture, path, ctype string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(fx.url+path, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// serveAPIError is the OpenAI error body.
type serveAPIError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    any     `json:"code"`
	} `json:"error"`
}

// checkErrorBody asserts that body is an OpenAI error body with a message
// and a type, and returns it.
func checkErrorBody(t testing.TB, what, body string) serveAPIError {
	t.Helper()
	var e serveAPIError
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil {
		t.Errorf("%s: not an OpenAI error body: %q", what, body)
		return e
	}
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("%s: error body without message or type: %s", what, body)
	}
	return e
}

// streamResult is what one streaming request received.
type streamResult struct {
	status  int
	text    string
	finish  string
	ttft    time.Duration // request sent to the first text
	total   time.Duration // request sent to [DONE]
	chunks  int
	tokens  int // usage.completion_tokens
	errBody string
}

// streamChat runs one streaming chat completion through the raw SSE
// protocol, checking its framing: every event a JSON chunk of one id, one
// finish_reason, the usage chunk, then [DONE] and nothing after it.
func streamChat(ctx context.Context, fx *serveFixture, prompt string, maxTokens int) (streamResult, error) {
	body, _ := json.Marshal(map[string]any{
		"model":          fx.model,
		"messages":       []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens":     maxTokens,
		"temperature":    0,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	req, err := http.NewRequestWithContext(ctx, "POST", fx.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return streamResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamResult{}, err
	}
	defer resp.Body.Close()
	r := streamResult{status: resp.StatusCode}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		r.errBody = string(b)
		return r, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return r, fmt.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	var text strings.Builder
	var id string
	done, usage := false, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return r, fmt.Errorf("not a data line: %q", line)
		}
		if done {
			return r, fmt.Errorf("an event after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return r, fmt.Errorf("chunk %q: %v", data, err)
		}
		if c.Error != nil {
			return r, fmt.Errorf("error event: %s", data)
		}
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			return r, fmt.Errorf("chunk id %q in the stream of %q (streams mixed)", c.ID, id)
		}
		if c.Object != "chat.completion.chunk" {
			return r, fmt.Errorf("chunk object %q", c.Object)
		}
		r.chunks++
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				return r, fmt.Errorf("choice index %d", ch.Index)
			}
			if ch.Delta.Content != "" && r.ttft == 0 {
				r.ttft = time.Since(t0)
			}
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				if r.finish != "" {
					return r, fmt.Errorf("a second finish_reason %q after %q", *ch.FinishReason, r.finish)
				}
				r.finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = true
			r.tokens = c.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	r.total = time.Since(t0)
	r.text = text.String()
	switch {
	case !done:
		return r, fmt.Errorf("the stream ended without [DONE]")
	case r.finish != "stop" && r.finish != "length":
		return r, fmt.Errorf("finish_reason %q", r.finish)
	case !usage:
		return r, fmt.Errorf("no usage chunk with include_usage")
	}
	return r, nil
}

// serveMetrics reads /metrics: each sample line "name{labels} value" keyed
// by "name{labels}" as the server wrote it.
func serveMetrics(t testing.TB, fx *serveFixture) map[string]float64 {
	t.Helper()
	code, body := serveGet(t, fx, "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// metricSum adds the samples of metric name whose labels hold every one of
// labels (each `key="value"`); found is false when no sample matched.
func metricSum(m map[string]float64, name string, labels ...string) (sum float64, found bool) {
	for k, v := range m {
		n, rest, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if ok {
			sum += v
			found = true
		}
	}
	return sum, found
}

// waitMetric polls /metrics until cond holds of metric name's sum (or fails
// after 10 s).
func waitMetric(t testing.TB, fx *serveFixture, what, name string, cond func(float64) bool, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var v float64
	for time.Now().Before(deadline) {
		var ok bool
		if v, ok = metricSum(serveMetrics(t, fx), name, labels...); ok && cond(v) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: %s stayed at %v", what, name, v)
}
