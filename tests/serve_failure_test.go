package tests

// serve failing without damage: every refusal of docs/errors.md ("serve:
// HTTP refusals") answered with its status and an OpenAI error body, a full
// queue answered 429 at once, a client that disconnects freeing its slot
// (seen in /metrics), a request timeout, an engine failure or panic failing
// only its requests, a shutdown that drains; the server answers afterwards.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ds4go/ds4/serve"
)

// refusal is one bad request and the answer docs/errors.md gives it.
type refusal struct {
	name         string // the row of docs/errors.md
	method, path string
	body         string
	status       int
	typ          string // error.type
	param, code  string // "" when the body has none
	msg          string // held by error.message
}

// chatBody is a chat request body of one user message with extra fields.
func chatBody(model string, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]%s}`, model, extra)
}

func serveRefusals(model string) []refusal {
	long := strings.Repeat("river ", 400)
	const chat, comp = "/v1/chat/completions", "/v1/completions"
	return []refusal{
		{"serve-bad-json", "POST", chat, `{"model": tiny}`, 400, "invalid_request_error", "", "", "not valid JSON"},
		{"serve-truncated-json", "POST", chat, `{"model":`, 400, "invalid_request_error", "", "", "not valid"},
		{"serve-not-object", "POST", chat, `[1, 2]`, 400, "invalid_request_error", "", "", "must be a JSON object"},
		{"serve-empty-body", "POST", chat, ``, 400, "invalid_request_error", "", "", "the request body is empty"},
		{"serve-two-values", "POST", chat, chatBody(model, "") + "{}", 400, "invalid_request_error", "", "", "more than one JSON value"},
		{"serve-wrong-type", "POST", chat, chatBody(model, `"max_tokens":"8"`), 400, "invalid_request_error", "max_tokens", "", "max_tokens"},
		{"serve-no-model", "POST", chat, `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "model", "", "model"},
		{"serve-unknown-model", "POST", chat, chatBody("no-such-model", ""), 404, "invalid_request_error", "model", "model_not_found", "does not exist"},
		{"serve-empty-messages", "POST", chat, fmt.Sprintf(`{"model":%q,"messages":[]}`, model), 400, "invalid_request_error", "messages", "", "at least one message"},
		{"serve-bad-role", "POST", chat, fmt.Sprintf(`{"model":%q,"messages":[{"role":"tool","content":"x"}]}`, model), 400, "invalid_request_error", "messages", "", "role"},
		{"serve-content-type", "POST", chat, fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, model), 400, "invalid_request_error", "messages", "", "only text parts"},
		{"serve-max-tokens-zero", "POST", chat, chatBody(model, `"max_tokens":0`), 400, "invalid_request_error", "max_tokens", "", "must be at least 1"},
		{"serve-max-tokens-over", "POST", chat, chatBody(model, `"max_tokens":100000`), 400, "invalid_request_error", "max_tokens", "", "over this server's limit"},
		{"serve-context-exceeded", "POST", chat, fmt.Sprintf(`{"model":%q,"max_tokens":8,"messages":[{"role":"user","content":%q}]}`, model, long), 400, "invalid_request_error", "max_tokens", "context_length_exceeded", "exceed the context"},
		{"serve-temperature-range", "POST", chat, chatBody(model, `"temperature":3`), 400, "invalid_request_error", "temperature", "", "must be in [0, 2]"},
		{"serve-top-p-range", "POST", chat, chatBody(model, `"top_p":0`), 400, "invalid_request_error", "top_p", "", "must be in (0, 1]"},
		{"serve-n", "POST", chat, chatBody(model, `"n":2`), 400, "invalid_request_error", "n", "", "one choice"},
		{"serve-stop-empty", "POST", chat, chatBody(model, `"stop":[""]`), 400, "invalid_request_error", "stop", "", "empty stop string"},
		{"serve-stop-limits", "POST", chat, chatBody(model, `"stop":"`+strings.Repeat("a", 300)+`"`), 400, "invalid_request_error", "stop", "", "at most 256"},
		{"serve-stop-type", "POST", chat, chatBody(model, `"stop":5`), 400, "invalid_request_error", "stop", "", "stop must be a string or a list of strings"},
		{"serve-reasoning-effort", "POST", chat, chatBody(model, `"reasoning_effort":"lots"`), 400, "invalid_request_error", "reasoning_effort", "", "reasoning_effort"},
		{"serve-no-prompt", "POST", comp, fmt.Sprintf(`{"model":%q}`, model), 400, "invalid_request_error", "prompt", "", "provide a prompt"},
		{"serve-prompt-id", "POST", comp, fmt.Sprintf(`{"model":%q,"prompt":[1,99999]}`, model), 400, "invalid_request_error", "prompt", "", "not a token id"},
		{"serve-prompt-list", "POST", comp, fmt.Sprintf(`{"model":%q,"prompt":["a","b"]}`, model), 400, "invalid_request_error", "prompt", "", "one prompt per request"},
		{"serve-body-too-large", "POST", chat, chatBody(model, `"user":"`+strings.Repeat("x", 5<<20)+`"`), 413, "invalid_request_error", "", "", "request body over"},
		{"serve-method", "GET", chat, "", 405, "invalid_request_error", "", "method_not_allowed", "use POST"},
		{"serve-unknown-path", "GET", "/v1/nope", "", 404, "invalid_request_error", "", "unknown_url", "no endpoint"},
	}
}

// The refusals tested elsewhere in this file: queue full, timeout, engine
// failure, shutting down, disconnect.
var serveRefusalsElsewhere = []string{"serve-queue-full", "serve-timeout", "serve-engine-failure", "serve-shutting-down"}

func TestServeRefusals(t *testing.T) {
	fx := startServe(t, serveOpts{slots: 2, queue: 2, maxTokens: 64})
	doc := errsDoc(t)
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (serve-[a-z0-9-]+) \|(.*)$`).FindAllStringSubmatch(doc, -1) {
		rows[m[1]] = m[2]
	}
	covered := map[string]bool{}
	for _, n := range serveRefusalsElsewhere {
		covered[n] = true
	}
	for _, c := range serveRefusals(fx.model) {
		covered[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			row, ok := rows[c.name]
			if !ok {
				t.Errorf("docs/errors.md has no row %s", c.name)
			} else if !strings.Contains(row, fmt.Sprintf("| %d |", c.status)) || !strings.Contains(row, "`"+c.typ+"`") {
				t.Errorf("docs/errors.md row %s does not give %d and `%s`: %s", c.name, c.status, c.typ, row)
			}
			req, err := http.NewRequest(c.method, fx.url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, c.status, b.String())
			}
			e := checkErrorBody(t, c.name, b.String())
			if e.Error == nil {
				return
			}
			if e.Error.Type != c.typ {
				t.Errorf("type %q, want %q", e.Error.Type, c.typ)
			}
			if got := deref(e.Error.Param); got != c.param {
				t.Errorf("param %q, want %q", got, c.param)
			}
			if got, _ := e.Error.Code.(string); got != c.code {
				t.Errorf("code %v, want %q", e.Error.Code, c.code)
			}
			if !strings.Contains(e.Error.Message, c.msg) {
				t.Errorf("message %q does not hold %q", e.Error.Message, c.msg)
			}
		})
	}
	for name := range rows {
		if !covered[name] {
			t.Errorf("docs/errors.md row %s has no case", name)
		}
	}
	// Still serving, and nothing left in a slot.
	if code, body := serveGet(t, fx, "/health"); code != 200 {
		t.Errorf("/health after the refusals: %d %s", code, body)
	}
	r, err := streamChat(context.Background(), fx, "still there?", 4)
	if err != nil || r.status != 200 {
		t.Fatalf("a good request after the refusals: %v %d %s", err, r.status, r.errBody)
	}
	m := serveMetrics(t, fx)
	if v, _ := metricSum(m, metricRequests, `status="400"`); v < 15 {
		t.Errorf("%s 400: %v", metricRequests, v)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// openStream starts a streaming chat request and reads up to its first
// text: the sequence then holds a slot. cancel disconnects the client.
func openStream(t *testing.T, fx *serveFixture, prompt string, maxTokens int) (disconnect func(), rest *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"model": fx.model, "stream": true, "max_tokens": maxTokens, "temperature": 0,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	req, _ := http.NewRequestWithContext(ctx, "POST", fx.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		t.Fatalf("stream %q: status %d", prompt, resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("stream %q: %v", prompt, err)
		}
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			break
		}
	}
	return func() { cancel(); resp.Body.Close() }, br
}

// TestServeOverloadAndDisconnect: one slot and a queue of one. A stream
// holds the slot, a second waits in the queue, a third is refused 429 at
// once; clients that disconnect free the slot and the queue (/metrics back
// to 0) and a later request succeeds. Then a burst of requests beyond
// slot + queue: each is answered 200 or 429, at least one 429.
func TestServeOverloadAndDisconnect(t *testing.T) {
	fx := startServe(t, serveOpts{slots: 1, queue: 1, maxLen: 4096, maxTokens: 4000})
	cancelA, _ := openStream(t, fx, "hold the slot", 4000)
	waitMetric(t, fx, "first stream admitted", metricActive, func(v float64) bool { return v == 1 })

	// B waits in the queue (its headers come with its first text).
	ctxB, cancelB := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() {
		_, err := streamChat(ctxB, fx, "wait in the queue", 4000)
		bDone <- err
	}()
	waitMetric(t, fx, "second request queued", metricQueue, func(v float64) bool { return v == 1 })

	// C: the queue is full.
	code, body := servePost(t, fx, "/v1/chat/completions", "application/json", []byte(chatBody(fx.model, `"max_tokens":4`)))
	if code != 429 {
		t.Fatalf("a request past slot and queue: %d %s, want 429", code, body)
	}
	if e := checkErrorBody(t, "queue full", body); e.Error != nil && (e.Error.Type != "overloaded_error" || e.Error.Code != "queue_full") {
		t.Errorf("queue full: %s", body)
	}
	t.Logf("429: %s", strings.TrimSpace(body))

	// A disconnects mid-stream: B gets the slot; then B disconnects too.
	before := serveMetrics(t, fx)
	cancelA()
	waitMetric(t, fx, "queued request admitted after a disconnect", metricQueue, func(v float64) bool { return v == 0 })
	cancelB()
	if err := <-bDone; err == nil || !errors.Is(err, context.Canceled) {
		t.Logf("second stream ended with %v", err)
	}
	waitMetric(t, fx, "slots freed after the disconnects", metricActive, func(v float64) bool { return v == 0 })
	// Cancelled sequences stop generating: far fewer than 2 x 4000 tokens.
	time.Sleep(50 * time.Millisecond)
	if d := serveMetricDelta(before, serveMetrics(t, fx), metricTokensOut); d > 2000 {
		t.Errorf("%v tokens generated after the clients left", d)
	}

	// A later request is served.
	r, err := streamChat(context.Background(), fx, "after the disconnects", 8)
	if err != nil || r.status != 200 {
		t.Fatalf("a request after the disconnects: %v %d %s", err, r.status, r.errBody)
	}

	// A burst past slot + queue: 200 or 429 each (with an error body), some 429.
	const burst = 6
	codes := make([]int, burst)
	bodies := make([]string, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			resp, err := http.Post(fx.url+"/v1/chat/completions", "application/json",
				strings.NewReader(chatBody(fx.model, `"max_tokens":200,"temperature":0`)))
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			codes[i], bodies[i] = resp.StatusCode, b.String()
		})
	}
	wg.Wait()
	n429 := 0
	for i, c := range codes {
		switch c {
		case 200:
		case 429:
			n429++
			checkErrorBody(t, "burst 429", bodies[i])
		default:
			t.Errorf("burst request %d: %d %s", i, c, bodies[i])
		}
	}
	if n429 == 0 {
		t.Errorf("a burst of %d requests on 1 slot + a queue of 1 got no 429: %v", burst, codes)
	}
	m := serveMetrics(t, fx)
	if v, _ := metricSum(m, metricRequests, `status="429"`); v != float64(n429+1) {
		t.Errorf("%s 429 = %v, want %d", metricRequests, v, n429+1)
	}
	waitMetric(t, fx, "slots free after the burst", metricActive, func(v float64) bool { return v == 0 })
}

// TestServeTimeout: a request over -request-timeout is answered 504 and
// its slot freed.
func TestServeTimeout(t *testing.T) {
	// Steps of at least 5 ms: 4000 tokens outlast the timeout on any
	// machine (the tiny model's answer, ~300 tokens to its end of sentence,
	// took less than the timeout at full speed).
	slow := func(e serve.Engine) serve.Engine { return slowSteps{e, 5 * time.Millisecond} }
	fx := startServe(t, serveOpts{slots: 1, queue: 1, maxLen: 4096, maxTokens: 4000, timeout: 500 * time.Millisecond, wrap: slow})
	code, body := servePost(t, fx, "/v1/chat/completions", "application/json", []byte(chatBody(fx.model, `"max_tokens":4000,"temperature":0`)))
	if code != 504 {
		t.Fatalf("a request over the timeout: %d %s, want 504", code, body)
	}
	if e := checkErrorBody(t, "timeout", body); e.Error != nil && e.Error.Type != "timeout_error" {
		t.Errorf("timeout: %s", body)
	}
	waitMetric(t, fx, "slot freed after the timeout", metricActive, func(v float64) bool { return v == 0 })
	// (One token: well inside the timeout, even under -race.)
	if r, err := streamChat(context.Background(), fx, "quick", 1); err != nil || r.status != 200 {
		t.Fatalf("a request after the timeout: %v %d %s", err, r.status, r.errBody)
	}
}

// slowSteps is an engine whose decode steps take at least d.
type slowSteps struct {
	serve.Engine
	d time.Duration
}

func (s slowSteps) Step(slots []int, tokens []int64) ([][]float32, error) {
	time.Sleep(s.d)
	return s.Engine.Step(slots, tokens)
}

// failing is an engine whose next calls fail or panic on demand.
type failing struct {
	serve.Engine
	failStep, panicStep, failPrefill atomic.Bool
}

func (f *failing) Prefill(slot int, tokens []int64) ([]float32, error) {
	if f.failPrefill.CompareAndSwap(true, false) {
		return nil, errors.New("injected prefill failure")
	}
	return f.Engine.Prefill(slot, tokens)
}

func (f *failing) Step(slots []int, tokens []int64) ([][]float32, error) {
	if f.failStep.CompareAndSwap(true, false) {
		return nil, errors.New("injected kernel failure")
	}
	if f.panicStep.CompareAndSwap(true, false) {
		panic("injected panic")
	}
	return f.Engine.Step(slots, tokens)
}

// TestServeEngineFailure: a failing or panicking engine call fails its own
// requests with 500 and the server goes on, giving the same answers.
func TestServeEngineFailure(t *testing.T) {
	var f *failing
	fx := startServe(t, serveOpts{slots: 2, queue: 4, wrap: func(e serve.Engine) serve.Engine {
		f = &failing{Engine: e}
		return f
	}})
	good, err := streamChat(context.Background(), fx, "a good answer", 8)
	if err != nil || good.status != 200 {
		t.Fatalf("before the failures: %v %d", err, good.status)
	}
	for _, inject := range []*atomic.Bool{&f.failStep, &f.panicStep, &f.failPrefill} {
		inject.Store(true)
		code, body := servePost(t, fx, "/v1/chat/completions", "application/json", []byte(chatBody(fx.model, `"max_tokens":8,"temperature":0`)))
		if code != 500 {
			t.Errorf("an engine failure: %d %s, want 500", code, body)
		} else if e := checkErrorBody(t, "engine failure", body); e.Error != nil && e.Error.Type != "server_error" {
			t.Errorf("engine failure: %s", body)
		}
		r, err := streamChat(context.Background(), fx, "a good answer", 8)
		if err != nil || r.status != 200 || r.text != good.text {
			t.Errorf("after an engine failure: %v %d %q, want %q", err, r.status, r.text, good.text)
		}
	}
	waitMetric(t, fx, "slots free after the failures", metricActive, func(v float64) bool { return v == 0 })
	if v, _ := metricSum(serveMetrics(t, fx), "ds4_serve_engine_failures_total"); v != 3 {
		t.Errorf("ds4_serve_engine_failures_total %v, want 3", v)
	}
}

// TestServeShutdown: Shutdown lets an in-flight stream finish, answers new
// requests 503 (and /health) meanwhile, and returns.
func TestServeShutdown(t *testing.T) {
	fx := startServe(t, serveOpts{slots: 1, queue: 1, maxLen: 1024, maxTokens: 600})
	ctx := context.Background()
	res := make(chan streamResult, 1)
	go func() {
		r, err := streamChat(ctx, fx, "finish me", 600)
		if err != nil {
			t.Errorf("the in-flight stream: %v", err)
		}
		res <- r
	}()
	waitMetric(t, fx, "stream admitted", metricActive, func(v float64) bool { return v == 1 })
	shut := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		shut <- fx.srv.Shutdown(c)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := serveGet(t, fx, "/health")
		if code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health still %d during shutdown", code)
		}
		time.Sleep(2 * time.Millisecond)
	}
	code, body := servePost(t, fx, "/v1/chat/completions", "application/json", []byte(chatBody(fx.model, `"max_tokens":4`)))
	if r := <-res; r.status != 200 || (r.finish != "length" && r.finish != "stop") {
		t.Errorf("the in-flight stream during shutdown: %d %q", r.status, r.finish)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if code != 503 {
		t.Errorf("a request during shutdown: %d %s, want 503", code, body)
	} else if e := checkErrorBody(t, "shutting down", body); e.Error != nil && e.Error.Type != "service_unavailable" {
		t.Errorf("shutting down: %s", body)
	}
}
