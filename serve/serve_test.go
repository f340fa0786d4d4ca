package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ds4go/ds4/tokenizer"
)

const model = "tiny-test"

var (
	tokOnce sync.Once
	tok     *tokenizer.Tokenizer
	tokErr  error
)

// testTokenizer is the tiny checkpoint's tokenizer (single characters are
// tokens of their own).
func testTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tokOnce.Do(func() { tok, tokErr = tokenizer.Load("../testdata/tiny/tokenizer.json") })
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tok
}

// ids are the tokens of text, one per character.
func ids(t *testing.T, text string) []int64 {
	var out []int64
	for _, r := range text {
		out = append(out, testTokenizer(t).Encode(string(r))...)
	}
	return out
}

// newTest starts a Server on f behind an httptest server.
func newTest(t *testing.T, f *fakeEngine, edit func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := Config{Engine: f, Tokenizer: testTokenizer(t), ModelName: model, MaxSeqLen: 64, MaxTokens: 32,
		Logger: log.New(io.Discard, "", 0)}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	return s, hs
}

func post(t *testing.T, hs *httptest.Server, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func chatBody(extra string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

// errorBody is the OpenAI error body.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestValidation(t *testing.T) {
	_, hs := newTest(t, newFake(2), nil)
	long := strings.Repeat("a", 70)
	cases := []struct {
		name, method, path, body string
		status                   int
		typ, param               string
	}{
		{"ok", "POST", "/v1/chat/completions", chatBody(`,"max_tokens":3`), 200, "", ""},
		{"unknown-field-ignored", "POST", "/v1/chat/completions", chatBody(`,"max_tokens":3,"frobnicate":{"x":1}`), 200, "", ""},
		{"content-parts", "POST", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":2}`, 200, "", ""},
		{"completion-ok", "POST", "/v1/completions", `{"model":"` + model + `","prompt":"hi","max_tokens":2}`, 200, "", ""},
		{"completion-ids", "POST", "/v1/completions", `{"model":"` + model + `","prompt":[0,67,68],"max_tokens":2}`, 200, "", ""},
		{"bad-json", "POST", "/v1/chat/completions", `{"model":`, 400, typeInvalid, ""},
		{"not-an-object", "POST", "/v1/chat/completions", `[1,2]`, 400, typeInvalid, ""},
		{"empty-body", "POST", "/v1/chat/completions", ``, 400, typeInvalid, ""},
		{"two-values", "POST", "/v1/chat/completions", chatBody("") + `{}`, 400, typeInvalid, ""},
		{"wrong-type-max-tokens", "POST", "/v1/chat/completions", chatBody(`,"max_tokens":"3"`), 400, typeInvalid, "max_tokens"},
		{"wrong-type-temperature", "POST", "/v1/chat/completions", chatBody(`,"temperature":"hot"`), 400, typeInvalid, "temperature"},
		{"wrong-type-stream", "POST", "/v1/chat/completions", chatBody(`,"stream":1`), 400, typeInvalid, "stream"},
		{"wrong-type-stop", "POST", "/v1/chat/completions", chatBody(`,"stop":5`), 400, typeInvalid, "stop"},
		{"wrong-type-content", "POST", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":5}]}`, 400, typeInvalid, "messages"},
		{"no-model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, typeInvalid, "model"},
		{"unknown-model", "POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, typeInvalid, "model"},
		{"no-messages", "POST", "/v1/chat/completions", `{"model":"` + model + `","messages":[]}`, 400, typeInvalid, "messages"},
		{"bad-role", "POST", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"tool","content":"x"}]}`, 400, typeInvalid, "messages"},
		{"max-tokens-zero", "POST", "/v1/chat/completions", chatBody(`,"max_tokens":0`), 400, typeInvalid, "max_tokens"},
		{"max-tokens-negative", "POST", "/v1/chat/completions", chatBody(`,"max_completion_tokens":-1`), 400, typeInvalid, "max_completion_tokens"},
		{"max-tokens-over-limit", "POST", "/v1/chat/completions", chatBody(`,"max_tokens":33`), 400, typeInvalid, "max_tokens"},
		{"prompt-over-context", "POST", "/v1/completions", `{"model":"` + model + `","prompt":"` + long + `","max_tokens":1}`, 400, typeInvalid, "max_tokens"},
		{"prompt-fills-context", "POST", "/v1/completions", `{"model":"` + model + `","prompt":"` + long + `"}`, 400, typeInvalid, "prompt"},
		{"prompt-missing", "POST", "/v1/completions", `{"model":"` + model + `"}`, 400, typeInvalid, "prompt"},
		{"prompt-bad-id", "POST", "/v1/completions", `{"model":"` + model + `","prompt":[99999]}`, 400, typeInvalid, "prompt"},
		{"prompt-list", "POST", "/v1/completions", `{"model":"` + model + `","prompt":["a","b"]}`, 400, typeInvalid, "prompt"},
		{"temperature-high", "POST", "/v1/chat/completions", chatBody(`,"temperature":2.5`), 400, typeInvalid, "temperature"},
		{"temperature-negative", "POST", "/v1/chat/completions", chatBody(`,"temperature":-0.1`), 400, typeInvalid, "temperature"},
		{"top-p-zero", "POST", "/v1/chat/completions", chatBody(`,"top_p":0`), 400, typeInvalid, "top_p"},
		{"top-p-high", "POST", "/v1/chat/completions", chatBody(`,"top_p":1.5`), 400, typeInvalid, "top_p"},
		{"n-two", "POST", "/v1/chat/completions", chatBody(`,"n":2`), 400, typeInvalid, "n"},
		{"empty-stop", "POST", "/v1/chat/completions", chatBody(`,"stop":[""]`), 400, typeInvalid, "stop"},
		{"long-stop", "POST", "/v1/chat/completions", chatBody(`,"stop":"` + strings.Repeat("a", maxStopBytes+1) + `"`), 400, typeInvalid, "stop"},
		{"many-stops", "POST", "/v1/chat/completions", chatBody(`,"stop":[` + strings.Repeat(`"a",`, maxStops) + `"b"]`), 400, typeInvalid, "stop"},
		{"bad-effort", "POST", "/v1/chat/completions", chatBody(`,"reasoning_effort":"extreme"`), 400, typeInvalid, "reasoning_effort"},
		{"too-large", "POST", "/v1/chat/completions", `{"model":"` + strings.Repeat("x", 5<<20) + `"}`, 413, typeInvalid, ""},
		{"get-chat", "GET", "/v1/chat/completions", "", 405, typeInvalid, ""},
		{"post-models", "POST", "/v1/models", "{}", 405, typeInvalid, ""},
		{"unknown-path", "GET", "/v2/nothing", "", 404, typeInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, hs.URL+c.path, strings.NewReader(c.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if c.status == 200 {
				return
			}
			var e errorBody
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
				t.Fatalf("not an OpenAI error body: %s", b)
			}
			if e.Error.Type != c.typ {
				t.Errorf("type %q, want %q", e.Error.Type, c.typ)
			}
			if got := ""; c.param != "" {
				if e.Error.Param != nil {
					got = *e.Error.Param
				}
				if got != c.param {
					t.Errorf("param %q, want %q (%s)", got, c.param, e.Error.Message)
				}
			}
		})
	}
	// The server is still up after every refusal.
	if code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":2`)); code != 200 {
		t.Fatalf("after the refusals: %d", code)
	}
}

func TestModelNotFoundCode(t *testing.T) {
	_, hs := newTest(t, newFake(1), nil)
	_, b := post(t, hs, "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`)
	var e errorBody
	json.Unmarshal([]byte(b), &e)
	if e.Error.Code == nil || *e.Error.Code != "model_not_found" {
		t.Fatalf("code %v, want model_not_found: %s", e.Error.Code, b)
	}
}

// sse reads an event stream: the data of each event, [DONE] last.
func sse(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			blank = true
			continue
		}
		if !blank {
			t.Fatalf("event without a blank line before it: %q", line)
		}
		blank = false
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		out = append(out, data)
	}
	return out
}

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage    `json:"usage"`
	Error *apiError `json:"error"`
}

// stream posts body and returns its chunks (without [DONE], which it checks).
func stream(t *testing.T, hs *httptest.Server, path, body string) []chunk {
	t.Helper()
	resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := sse(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("the stream does not end with [DONE]: %q", events)
	}
	var out []chunk
	for _, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		out = append(out, c)
	}
	return out
}

type chatResult struct {
	Choices []struct {
		Message struct {
			Content          string  `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func complete(t *testing.T, hs *httptest.Server, path, body string) chatResult {
	t.Helper()
	code, b := post(t, hs, path, body)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var r chatResult
	if err := json.Unmarshal([]byte(b), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("response %s: %v", b, err)
	}
	return r
}

func TestSSEFormat(t *testing.T) {
	_, hs := newTest(t, newFake(2), nil)
	whole := complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":6`))
	chunks := stream(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}`))
	if c := chunks[0]; len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant" || c.Object != "chat.completion.chunk" {
		t.Fatalf("first chunk %+v: want the assistant role", c)
	}
	var text strings.Builder
	for _, c := range chunks[:len(chunks)-2] {
		if len(c.Choices) != 1 || c.Choices[0].FinishReason != nil || c.Usage != nil {
			t.Fatalf("chunk %+v: a delta without finish reason or usage wanted", c)
		}
		if d := c.Choices[0].Delta.Content; d != nil {
			text.WriteString(*d)
		}
	}
	fin := chunks[len(chunks)-2]
	if len(fin.Choices) != 1 || fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "length" {
		t.Fatalf("last choice chunk %+v: want finish_reason length", fin)
	}
	u := chunks[len(chunks)-1]
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 6 || u.Usage.TotalTokens != u.Usage.PromptTokens+6 {
		t.Fatalf("usage chunk %+v", u)
	}
	if text.String() != whole.Choices[0].Message.Content || whole.Choices[0].FinishReason != "length" || whole.Usage.CompletionTokens != 6 {
		t.Fatalf("streamed %q, whole %+v", text.String(), whole)
	}
	// Without include_usage: no usage chunk.
	chunks = stream(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3,"stream":true`))
	if last := chunks[len(chunks)-1]; last.Usage != nil || len(last.Choices) != 1 {
		t.Fatalf("last chunk without include_usage: %+v", last)
	}
	// Text completions stream "text".
	whole = complete(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"hi","max_tokens":5}`)
	chunks = stream(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"hi","max_tokens":5,"stream":true}`)
	text.Reset()
	for _, c := range chunks {
		if c.Object != "text_completion" {
			t.Fatalf("completion chunk object %q", c.Object)
		}
		text.WriteString(c.Choices[0].Text)
	}
	if text.String() != whole.Choices[0].Text || text.Len() != 5 {
		t.Fatalf("streamed %q, whole %q", text.String(), whole.Choices[0].Text)
	}
}

func TestStopStringHoldback(t *testing.T) {
	f := newFake(1)
	f.script = ids(t, "abcSTOxSTOPdef")
	_, hs := newTest(t, f, nil)
	body := chatBody(`,"max_tokens":20,"stop":["STOP","zz"],"stream":true`)
	chunks := stream(t, hs, "/v1/chat/completions", body)
	var text strings.Builder
	var reason string
	for _, c := range chunks {
		if d := c.Choices[0].Delta.Content; d != nil {
			if strings.Contains(*d, "STOP") || strings.HasSuffix(*d, "ST") && len(text.String()+*d) > len("abcSTOx") {
				t.Errorf("chunk %q leaks the stop string", *d)
			}
			text.WriteString(*d)
		}
		if fr := c.Choices[0].FinishReason; fr != nil {
			reason = *fr
		}
	}
	if text.String() != "abcSTOx" || reason != "stop" {
		t.Fatalf("streamed %q (finish %q), want \"abcSTOx\" and stop", text.String(), reason)
	}
	r := complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":20,"stop":"STOP"`))
	if r.Choices[0].Message.Content != "abcSTOx" || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("whole %+v", r)
	}
	// The end of sentence stops too (the script ends with it).
	r = complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":20`))
	if r.Choices[0].Message.Content != "abcSTOxSTOPdef" || r.Choices[0].FinishReason != "stop" || r.Usage.CompletionTokens != 15 {
		t.Fatalf("to the end of sentence: %+v", r)
	}
}

func TestUTF8NotSplit(t *testing.T) {
	f := newFake(1)
	f.script = testTokenizer(t).Encode("aé€b")
	_, hs := newTest(t, f, nil)
	var text strings.Builder
	for _, c := range stream(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"x","max_tokens":20,"stream":true}`) {
		if !utf8.ValidString(c.Choices[0].Text) {
			t.Errorf("chunk %q splits a character", c.Choices[0].Text)
		}
		text.WriteString(c.Choices[0].Text)
	}
	if text.String() != "aé€b" {
		t.Fatalf("streamed %q", text.String())
	}
}

func TestReasoningContent(t *testing.T) {
	f := newFake(1)
	f.script = append(append(ids(t, "hmm"), testTokenizer(t).Encode("</think>")...), ids(t, "ok")...)
	_, hs := newTest(t, f, func(c *Config) { c.MaxSeqLen = 128 })
	r := complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":20,"reasoning_effort":"high"`))
	m := r.Choices[0].Message
	if m.ReasoningContent == nil || *m.ReasoningContent != "hmm" || m.Content != "ok" {
		t.Fatalf("reasoning %v content %q, want hmm / ok", m.ReasoningContent, m.Content)
	}
	var reasoning, content strings.Builder
	for _, c := range stream(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":20,"reasoning_effort":"low","stream":true`)) {
		d := c.Choices[0].Delta
		if d.ReasoningContent != nil {
			reasoning.WriteString(*d.ReasoningContent)
		}
		if d.Content != nil {
			content.WriteString(*d.Content)
		}
	}
	if reasoning.String() != "hmm" || content.String() != "ok" {
		t.Fatalf("streamed reasoning %q content %q", reasoning.String(), content.String())
	}
	// Without reasoning_effort (and no -thinking), the whole answer is content.
	r = complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":20`))
	if r.Choices[0].Message.ReasoningContent != nil || !strings.HasPrefix(r.Choices[0].Message.Content, "hmm") {
		t.Fatalf("without thinking: %+v", r.Choices[0].Message)
	}
}

// TestBatchedEqualsAlone: concurrent greedy requests share steps and each
// answer equals the one it gets alone.
func TestBatchedEqualsAlone(t *testing.T) {
	for _, ragged := range []bool{true, false} {
		f := newFake(4)
		f.ragged = ragged
		f.delay = 2 * time.Millisecond
		_, hs := newTest(t, f, func(c *Config) { c.MaxQueue = 16 })
		prompts := []string{"a", "bb", "ccc", "dddd", "e", "ff", "ggg", "hhhh"}
		alone := map[string]string{}
		for _, p := range prompts {
			alone[p] = complete(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"`+p+`","max_tokens":12}`).Choices[0].Text
		}
		var wg sync.WaitGroup
		got := make([]string, len(prompts))
		for i, p := range prompts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var b strings.Builder
				for _, c := range stream(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"`+p+`","max_tokens":12,"stream":true}`) {
					b.WriteString(c.Choices[0].Text)
				}
				got[i] = b.String()
			}()
		}
		wg.Wait()
		for i, p := range prompts {
			if got[i] != alone[p] {
				t.Errorf("ragged %v: prompt %q batched %q, alone %q", ragged, p, got[i], alone[p])
			}
		}
		f.mu.Lock()
		shared := 0
		for i, s := range f.steps {
			if len(s) > 1 {
				shared++
			}
			if !ragged {
				for _, p := range f.stepPos[i] {
					if p != f.stepPos[i][0] {
						t.Errorf("non-ragged step at positions %v", f.stepPos[i])
					}
				}
			}
		}
		f.mu.Unlock()
		if shared == 0 {
			t.Errorf("ragged %v: no step decoded two sequences at once", ragged)
		}
	}
}

// TestPrefillManyEqualsAlone: on an engine that prefills several slots
// in one call, a burst of requests is admitted a round of slots at a time
// (distinct free slots), every answer equals the one it gets alone, and a
// prefill that fails fails only its own request.
func TestPrefillManyEqualsAlone(t *testing.T) {
	f := newFake(4)
	f.delay = 2 * time.Millisecond
	m := &manyFake{fakeEngine: f}
	m.fail = testTokenizer(t).Encode("boom")
	_, hs := newTest(t, f, func(c *Config) { c.MaxQueue = 16; c.Engine = m })
	prompts := []string{"a", "bb", "ccc", "dddd", "e", "ff", "ggg", "hhhh"}
	alone := map[string]string{}
	for _, p := range prompts {
		alone[p] = complete(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"`+p+`","max_tokens":12}`).Choices[0].Text
	}
	failed := burstMatchesAlone(t, hs, prompts, alone, "with the burst", func(_ int, p string) string {
		return `{"model":"` + model + `","prompt":"` + p + `","max_tokens":12}`
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	wide := 0
	for _, c := range m.calls {
		seen := map[int]bool{}
		for _, sl := range c {
			if seen[sl] || sl < 0 || sl >= f.slots {
				t.Errorf("PrefillMany of slots %v", c)
			}
			seen[sl] = true
		}
		if len(c) > 1 {
			wide++
		}
	}
	if wide == 0 || failed != 1 {
		t.Errorf("%d PrefillMany calls of several slots (of %d), %d failed", wide, len(m.calls), failed)
	}
}

// TestStepPrefillJoinsRunningStreams: on an engine that runs a step and
// prefills side by side (two cores), requests that arrive while others
// are decoding are prefilled beside a step (StepPrefill: into free slots
// the call does not step, until their prompt tokens reach the budget),
// every answer equals the one it gets alone, and a prefill that fails
// there fails only its own request.
func TestStepPrefillJoinsRunningStreams(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f := newFake(4)
	f.delay = 2 * time.Millisecond
	m := &stepFake{manyFake: &manyFake{fakeEngine: f}}
	m.fail = testTokenizer(t).Encode("boom")
	const budget = 4 // tokens: about two of these prompts
	_, hs := newTest(t, f, func(c *Config) { c.MaxQueue = 16; c.Engine = m; c.PrefillTokens = budget })
	prompts := []string{"a", "bb", "ccc", "dddd", "e", "ff", "ggg", "hhhh"}
	// answers of different lengths, so that slots free while others run
	req := func(i int, p string) string {
		return fmt.Sprintf(`{"model":"%s","prompt":"%s","max_tokens":%d}`, model, p, 3+2*i)
	}
	alone := map[string]string{}
	for i, p := range prompts {
		alone[p] = complete(t, hs, "/v1/completions", req(i, p)).Choices[0].Text
	}
	failed := burstMatchesAlone(t, hs, prompts, alone, "with the others", req)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.joint {
		stepped := map[int]bool{}
		for _, sl := range c[0] {
			stepped[sl] = true
		}
		before := 0 // the prompt tokens of the prefills before the last
		for _, n := range c[2][:max(0, len(c[2])-1)] {
			before += n
		}
		if len(c[0]) == 0 || len(c[1]) == 0 || before >= budget {
			t.Errorf("StepPrefill of slots %v with prefills of %v, prompts of %v tokens (a budget of %d)", c[0], c[1], c[2], budget)
		}
		for _, sl := range c[1] {
			if stepped[sl] || sl < 0 || sl >= f.slots {
				t.Errorf("StepPrefill of slots %v prefills slot %d", c[0], sl)
			}
		}
	}
	if len(m.joint) == 0 || failed != 1 {
		t.Errorf("%d StepPrefill calls, %d failed requests", len(m.joint), failed)
	}
}

// TestPrefillBudgetAdmitsBurst: requests that arrive together while a
// stream decodes join one step when their prompts fit the budget
// (Config.PrefillTokens), and one per step with a budget of one token.
func TestPrefillBudgetAdmitsBurst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, budget := range []int{1, DefaultPrefillTokens} {
		f := newFake(4)
		f.gate = make(chan struct{}) // the long request's first step waits for the burst
		m := &stepFake{manyFake: &manyFake{fakeEngine: f}}
		_, hs := newTest(t, f, func(c *Config) { c.MaxQueue = 16; c.Engine = m; c.PrefillTokens = budget })
		var wg sync.WaitGroup
		waitFor := func(name string, v float64) {
			for deadline := time.Now().Add(10 * time.Second); metric(t, hs, name, "") < v; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s never reached %v", name, v)
				}
			}
		}
		wg.Go(func() { post(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"long","max_tokens":30}`) })
		waitFor("ds4_serve_active_slots", 1)
		for _, p := range []string{"a", "b", "c"} {
			wg.Go(func() { post(t, hs, "/v1/completions", `{"model":"`+model+`","prompt":"`+p+`","max_tokens":2}`) })
		}
		waitFor("ds4_serve_queue_depth", 3)
		close(f.gate)
		wg.Wait()
		m.mu.Lock()
		widest, joined := 0, 0
		for _, c := range m.joint {
			widest, joined = max(widest, len(c[1])), joined+len(c[1])
		}
		m.mu.Unlock()
		if budget == 1 && (widest != 1 || joined != 3) {
			t.Errorf("a budget of 1 token: %d prefills joined steps, up to %d in one (want 3, one per step)", joined, widest)
		}
		if budget > 1 && widest != 3 {
			t.Errorf("a budget of %d tokens: up to %d prefills joined one step (want the burst's 3)", budget, widest)
		}
	}
}

// metric reads one sample of /metrics (the sum over labels holding sub).
func metric(t *testing.T, hs *httptest.Server, name, sub string) float64 {
	t.Helper()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name) && (line[len(name)] == ' ' || line[len(name)] == '{') && strings.Contains(line, sub) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestQueueFull429(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	_, hs := newTest(t, f, func(c *Config) { c.MaxQueue = 1 })
	results := make(chan int, 2)
	go func() { code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); results <- code }()
	waitFor(t, "the first request active", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 1 })
	go func() { code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); results <- code }()
	waitFor(t, "the second request queued", func() bool { return metric(t, hs, "ds4_serve_queue_depth", "") == 1 })
	code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`))
	var e errorBody
	if code != 429 || json.Unmarshal([]byte(b), &e) != nil || e.Error.Type == "" {
		t.Fatalf("with the queue full: %d %s, want 429 and an error body", code, b)
	}
	close(f.gate)
	for range 2 {
		if c := <-results; c != 200 {
			t.Errorf("a queued request ended %d", c)
		}
	}
	if n := metric(t, hs, "ds4_serve_requests_total", `status="429"`); n != 1 {
		t.Errorf("requests_total 429 = %v", n)
	}
}

func TestCancelFreesSlot(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	_, hs := newTest(t, f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(chatBody(`,"max_tokens":30,"stream":true`)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, "the request active", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 1 })
	f.gate <- struct{}{} // one step
	cancel()
	<-done
	go func() {
		for {
			select {
			case f.gate <- struct{}{}:
			case <-time.After(2 * time.Second):
				return
			}
		}
	}()
	waitFor(t, "the slot freed", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 0 })
	f.mu.Lock()
	frees := len(f.frees)
	f.mu.Unlock()
	if frees == 0 {
		t.Fatal("the engine's slot was not freed")
	}
	// The slot serves the next request.
	if code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); code != 200 {
		t.Fatalf("after the cancel: %d %s", code, b)
	}
}

// A client that leaves while its request waits in the queue: the request
// is dropped when it reaches the head (never prefilled) and the queue
// empties.
func TestCancelWhileQueued(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	_, hs := newTest(t, f, nil)
	first := make(chan int, 1)
	go func() { code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); first <- code }()
	waitFor(t, "the first request active", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(chatBody(`,"max_tokens":3`)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the second request queued", func() bool { return metric(t, hs, "ds4_serve_queue_depth", "") == 1 })
	cancel()
	<-done
	// The server sees the disconnect on its own (its connection's reader):
	// the handler answers 499 then.
	waitFor(t, "the server to see the disconnect", func() bool {
		return metric(t, hs, "ds4_serve_requests_total", `status="499"`) == 1
	})
	close(f.gate)
	if c := <-first; c != 200 {
		t.Fatalf("the first request ended %d", c)
	}
	waitFor(t, "the queue empty", func() bool { return metric(t, hs, "ds4_serve_queue_depth", "") == 0 })
	waitFor(t, "the slot free", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 0 })
	f.mu.Lock()
	prefills := f.prefills
	f.mu.Unlock()
	if prefills != 1 {
		t.Errorf("%d prefills, want 1: the cancelled request was prefilled", prefills)
	}
	if code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); code != 200 {
		t.Fatalf("after the cancel: %d %s", code, b)
	}
}

func TestTimeout(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	_, hs := newTest(t, f, func(c *Config) { c.RequestTimeout = 50 * time.Millisecond })
	code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":30`))
	var e errorBody
	if code != 504 || json.Unmarshal([]byte(b), &e) != nil || e.Error.Type != typeTimeout {
		t.Fatalf("timed out: %d %s", code, b)
	}
	close(f.gate)
	waitFor(t, "the slot freed", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 0 })
}

func TestEngineFailureFailsOnlyItsStep(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		f := newFake(2)
		f.script = ids(t, "abxyz")
		x := ids(t, "x")[0]
		if mode == "error" {
			f.failOn = x
		} else {
			f.panicOn = x
		}
		_, hs := newTest(t, f, nil)
		code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":10`))
		var e errorBody
		if code != 500 || json.Unmarshal([]byte(b), &e) != nil || e.Error.Type != typeServer {
			t.Fatalf("%s: %d %s, want 500", mode, code, b)
		}
		// Streaming: the error arrives as an event after the text so far.
		chunks := stream(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":10,"stream":true`))
		if len(chunks) == 0 {
			t.Fatalf("%s: empty stream", mode)
		}
		var text string
		for _, c := range chunks[:len(chunks)-1] {
			if c.Error != nil {
				t.Fatalf("%s: an error event before the last: %+v", mode, c.Error)
			}
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
				text += *c.Choices[0].Delta.Content
			}
		}
		if last := chunks[len(chunks)-1]; last.Error == nil || last.Error.Type != typeServer || text != "abx" {
			t.Fatalf("%s: streamed %q then %+v, want \"abx\" (x fails the step that feeds it) then a server_error event", mode, text, last)
		}
		f.mu.Lock()
		f.failOn, f.panicOn = -1, -1
		f.mu.Unlock()
		if r := complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":10`)); r.Choices[0].Message.Content != "abxyz" {
			t.Fatalf("%s: after the failure %+v", mode, r)
		}
		if n := metric(t, hs, "ds4_serve_engine_failures_total", ""); n != 2 {
			t.Errorf("%s: engine failures %v, want 2", mode, n)
		}
	}
}

func TestMetricsExposed(t *testing.T) {
	_, hs := newTest(t, newFake(3), nil)
	complete(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":4`))
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"ds4_serve_requests_total", "ds4_serve_prompt_tokens_total", "ds4_serve_completion_tokens_total",
		"ds4_serve_time_to_first_token_seconds_bucket", "ds4_serve_inter_token_latency_seconds_bucket", "ds4_serve_queue_depth",
		"ds4_serve_active_slots", "ds4_serve_slots 3"} {
		if !strings.Contains(string(b), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if n := metric(t, hs, "ds4_serve_completion_tokens_total", ""); n != 4 {
		t.Errorf("completion tokens %v, want 4", n)
	}
	if n := metric(t, hs, "ds4_serve_requests_total", `endpoint="/v1/chat/completions",status="200"`); n != 1 {
		t.Errorf("requests %v, want 1", n)
	}
}

func TestShutdownDrains(t *testing.T) {
	f := newFake(1)
	f.gate = make(chan struct{})
	s, hs := newTest(t, f, nil)
	result := make(chan int, 1)
	go func() { code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); result <- code }()
	waitFor(t, "the request active", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 1 })
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	waitFor(t, "draining", func() bool { return s.draining.Load() })
	if code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":3`)); code != 503 {
		t.Errorf("a new request while draining: %d, want 503", code)
	}
	if resp, err := http.Get(hs.URL + "/health"); err != nil || resp.StatusCode != 503 {
		t.Errorf("/health while draining: %v %v", resp, err)
	}
	close(f.gate)
	if c := <-result; c != 200 {
		t.Errorf("the in-flight request ended %d, want 200", c)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestShutdownCancelsAtDeadline(t *testing.T) {
	f := newFake(1)
	f.delay = 5 * time.Millisecond // 30 tokens: 150 ms, far past the deadline
	s, hs := newTest(t, f, nil)
	result := make(chan int, 1)
	go func() { code, _ := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":30`)); result <- code }()
	waitFor(t, "the request active", func() bool { return metric(t, hs, "ds4_serve_active_slots", "") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); err == nil {
		t.Error("Shutdown returned nil; want the deadline's error (a request was cancelled)")
	}
	if c := <-result; c != 503 {
		t.Errorf("the cancelled request ended %d, want 503", c)
	}
	if !s.sched.doneClosed() {
		t.Error("the scheduler still runs after Shutdown")
	}
}

// Logits the sampler cannot take (an empty row at temperature > 0 panics
// in engine.Sampling) fail that request alone.
func TestSamplerPanicFailsOnlyItsRequest(t *testing.T) {
	f := newFake(1)
	f.empty = true
	_, hs := newTest(t, f, nil)
	if code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":5,"temperature":0.7`)); code != 500 {
		t.Fatalf("empty logits: %d %s, want 500", code, b)
	}
	f.mu.Lock()
	f.empty = false
	f.mu.Unlock()
	if code, b := post(t, hs, "/v1/chat/completions", chatBody(`,"max_tokens":5,"temperature":0.7,"seed":1`)); code != 200 {
		t.Fatalf("after: %d %s", code, b)
	}
}

// The same seed gives the same sampled answer.
func TestSeedRepeats(t *testing.T) {
	_, hs := newTest(t, newFake(2), nil)
	body := chatBody(`,"max_tokens":8,"temperature":1.5,"seed":42`)
	a := complete(t, hs, "/v1/chat/completions", body).Choices[0].Message.Content
	b := complete(t, hs, "/v1/chat/completions", body).Choices[0].Message.Content
	if a != b {
		t.Fatalf("seed 42 gave %q then %q", a, b)
	}
}

// The outbox joins text of one kind and keeps the last event apart.
func TestOutboxJoins(t *testing.T) {
	o := newOutbox()
	for _, ev := range []event{{reasoning: "a"}, {reasoning: "b"}, {content: "c"}, {content: "d"}, {content: "e", finish: "stop"}} {
		o.push(ev)
	}
	<-o.notify
	got := o.take()
	if len(got) != 3 || got[0].reasoning != "ab" || got[1].content != "cd" || got[2].finish != "stop" || got[2].content != "e" {
		t.Fatalf("outbox %+v", got)
	}
	if len(o.take()) != 0 {
		t.Fatal("a second take returned events")
	}
}

// burstMatchesAlone posts every prompt at once, and "boom" (whose prefill
// fails) beside them: each answer must equal its answer alone, the failing
// one a 500. It returns how many failed.
func burstMatchesAlone(t *testing.T, hs *httptest.Server, prompts []string, alone map[string]string, label string, req func(i int, p string) string) int32 {
	t.Helper()
	var wg sync.WaitGroup
	got := make([]string, len(prompts))
	var failed atomic.Int32
	for i, p := range append(prompts, "boom") {
		wg.Go(func() {
			code, body := post(t, hs, "/v1/completions", req(i, p))
			if p == "boom" {
				if code != 500 {
					t.Errorf("the failing prefill answered %d: %s", code, body)
				}
				failed.Add(1)
				return
			}
			var r chatResult
			if err := json.Unmarshal([]byte(body), &r); err != nil || code != 200 {
				t.Errorf("prompt %q: %d %s", p, code, body)
				return
			}
			got[i] = r.Choices[0].Text
		})
	}
	wg.Wait()
	for i, p := range prompts {
		if got[i] != alone[p] {
			t.Errorf("prompt %q: %s %q, alone %q", p, label, got[i], alone[p])
		}
	}
	return failed.Load()
}
