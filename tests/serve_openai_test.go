package tests

// serve driven by the official OpenAI Go client (github.com/openai/openai-go/v3),
// unmodified, on a loopback listener: chat completions with and without
// streaming, text completions, the model list, usage, stop strings,
// max_tokens and an error surfaced as the SDK's *openai.Error.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// sdkChat is a greedy chat request of one user message.
func sdkChat(model, prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       shared.ChatModel(model),
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

func TestServeOpenAIClient(t *testing.T) {
	fx := startServe(t, serveOpts{slots: 4, queue: 8})
	c := fx.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const prompt = "Tell me about the sea."

	// Models: the one model, as the SDK types it.
	page, err := c.Models.List(ctx)
	if err != nil {
		t.Fatalf("models list: %v", err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != fx.model || page.Data[0].Object != "model" {
		t.Errorf("models list: %+v", page.Data)
	}

	// Non-streaming chat.
	full, err := c.Chat.Completions.New(ctx, sdkChat(fx.model, prompt, 16))
	if err != nil {
		t.Fatalf("chat completion: %v", err)
	}
	if len(full.Choices) != 1 {
		t.Fatalf("chat completion: %d choices", len(full.Choices))
	}
	want := full.Choices[0].Message.Content
	fin := full.Choices[0].FinishReason
	t.Logf("chat: %q (%s, usage %d+%d)", want, fin, full.Usage.PromptTokens, full.Usage.CompletionTokens)
	if full.Object != "chat.completion" || full.Model != fx.model || full.ID == "" {
		t.Errorf("chat completion: object %q model %q id %q", full.Object, full.Model, full.ID)
	}
	if fin != "stop" && fin != "length" {
		t.Errorf("finish_reason %q", fin)
	}
	if fin == "length" && full.Usage.CompletionTokens != 16 {
		t.Errorf("finish_reason length after %d tokens, max_tokens 16", full.Usage.CompletionTokens)
	}
	if u := full.Usage; u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %+v", u)
	}

	// Streaming chat, accumulated by the SDK: the same answer, greedy.
	p := sdkChat(fx.model, prompt, 16)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused chunk %d: %s", chunks, stream.Current().RawJSON())
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("chat stream: %d choices", len(acc.Choices))
	}
	if got := acc.Choices[0].Message.Content; got != want {
		t.Errorf("streamed %q, non-streamed %q", got, want)
	}
	if acc.Choices[0].FinishReason != fin {
		t.Errorf("streamed finish_reason %q, non-streamed %q", acc.Choices[0].FinishReason, fin)
	}
	if acc.Usage.CompletionTokens != full.Usage.CompletionTokens || acc.Usage.PromptTokens != full.Usage.PromptTokens {
		t.Errorf("streamed usage %+v, non-streamed %+v", acc.Usage, full.Usage)
	}
	t.Logf("stream: %d chunks", chunks)

	// max_tokens: finish_reason length after exactly that many tokens.
	if full.Usage.CompletionTokens > 4 {
		short, err := c.Chat.Completions.New(ctx, sdkChat(fx.model, prompt, 4))
		if err != nil {
			t.Fatalf("max_tokens 4: %v", err)
		}
		if short.Choices[0].FinishReason != "length" || short.Usage.CompletionTokens != 4 {
			t.Errorf("max_tokens 4: finish_reason %q after %d tokens", short.Choices[0].FinishReason, short.Usage.CompletionTokens)
		}
		if !strings.HasPrefix(want, strings.TrimRight(short.Choices[0].Message.Content, "\uFFFD")) {
			t.Errorf("max_tokens 4 gave %q, not a prefix of %q", short.Choices[0].Message.Content, want)
		}
	}

	// A stop string taken from the answer: the text ends before it.
	if stop, at := stopIn(want); stop != "" {
		sp := sdkChat(fx.model, prompt, 16)
		sp.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"@@never@@", stop}}
		r, err := c.Chat.Completions.New(ctx, sp)
		if err != nil {
			t.Fatalf("stop %q: %v", stop, err)
		}
		if got := r.Choices[0].Message.Content; got != want[:at] || r.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: %q (%s), want %q (stop)", stop, got, r.Choices[0].FinishReason, want[:at])
		}
	} else {
		t.Logf("no ASCII stop string in the answer %q", want)
	}

	// Sampling with a seed is reproducible.
	sp := sdkChat(fx.model, prompt, 12)
	sp.Temperature, sp.Seed = openai.Float(0.9), openai.Int(7)
	a, err := c.Chat.Completions.New(ctx, sp)
	if err != nil {
		t.Fatalf("seeded: %v", err)
	}
	b, err := c.Chat.Completions.New(ctx, sp)
	if err != nil {
		t.Fatalf("seeded: %v", err)
	}
	if a.Choices[0].Message.Content != b.Choices[0].Message.Content {
		t.Errorf("seed 7 gave %q then %q", a.Choices[0].Message.Content, b.Choices[0].Message.Content)
	}

	// Text completions, non-streaming and streaming.
	cp := openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel(fx.model),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(8),
		Temperature: openai.Float(0),
	}
	comp, err := c.Completions.New(ctx, cp)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	if len(comp.Choices) != 1 || comp.Object != "text_completion" || comp.Usage.CompletionTokens <= 0 {
		t.Fatalf("completion: %s", comp.RawJSON())
	}
	cp.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	cs := c.Completions.NewStreaming(ctx, cp)
	var text strings.Builder
	var cfin string
	for cs.Next() {
		for _, ch := range cs.Current().Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != "" {
				cfin = string(ch.FinishReason)
			}
		}
	}
	if err := cs.Err(); err != nil {
		t.Fatalf("completion stream: %v", err)
	}
	if text.String() != comp.Choices[0].Text || cfin != string(comp.Choices[0].FinishReason) {
		t.Errorf("completion stream %q (%s), non-streamed %q (%s)", text.String(), cfin, comp.Choices[0].Text, comp.Choices[0].FinishReason)
	}

	// An unknown model: the SDK's *openai.Error with the server's body.
	_, err = c.Chat.Completions.New(ctx, sdkChat("no-such-model", prompt, 4))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("unknown model: %v (%T), want *openai.Error", err, err)
	}
	if (apiErr.StatusCode != 404 && apiErr.StatusCode != 400) || apiErr.Message == "" || apiErr.Type == "" {
		t.Errorf("unknown model: status %d type %q code %q message %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
	}
	t.Logf("unknown model: %d %s", apiErr.StatusCode, apiErr.RawJSON())
	// The same through a stream.
	es := c.Chat.Completions.NewStreaming(ctx, sdkChat("no-such-model", prompt, 4))
	for es.Next() {
	}
	if !errors.As(es.Err(), &apiErr) {
		t.Errorf("unknown model, streaming: %v, want *openai.Error", es.Err())
	}
}

// stopIn picks a stop string from answer: three ASCII letters first found
// at index at >= 1 (so that the answer up to it is not empty).
func stopIn(answer string) (stop string, at int) {
	for i := 1; i+3 <= len(answer); i++ {
		s := answer[i : i+3]
		ok := true
		for _, r := range s {
			if r > unicode.MaxASCII || !unicode.IsLetter(r) {
				ok = false
			}
		}
		if ok && strings.Index(answer, s) == i {
			return s, i
		}
	}
	return "", 0
}

// TestServeOpenAIThinking: with reasoning_effort the model thinks first;
// the thinking reaches the SDK as the extra field reasoning_content, the
// same whether streamed (delta) or not (message).
func TestServeOpenAIThinking(t *testing.T) {
	fx := startServe(t, serveOpts{slots: 2, queue: 4})
	c := fx.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := sdkChat(fx.model, "Think about the sea.", 12)
	p.ReasoningEffort = shared.ReasoningEffortHigh
	full, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var reasoning string
	if f, ok := full.Choices[0].Message.JSON.ExtraFields["reasoning_content"]; !ok || json.Unmarshal([]byte(f.Raw()), &reasoning) != nil {
		t.Fatalf("no reasoning_content string in %s", full.RawJSON())
	}
	content := full.Choices[0].Message.Content
	t.Logf("reasoning %q, content %q", reasoning, content)
	if reasoning == "" {
		t.Errorf("empty reasoning_content with reasoning_effort high: %s", full.RawJSON())
	}
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var sr, sc strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			sc.WriteString(ch.Delta.Content)
			if f, ok := ch.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				if json.Unmarshal([]byte(f.Raw()), &s) == nil {
					sr.WriteString(s)
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if sr.String() != reasoning || sc.String() != content {
		t.Errorf("streamed reasoning %q content %q, non-streamed %q %q", sr.String(), sc.String(), reasoning, content)
	}
}
