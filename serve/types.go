package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The OpenAI request and response bodies this server reads and writes
// (the fields it knows; unknown request fields are ignored, as OpenAI does).

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Temperature         *float64       `json:"temperature"`
	TopP                *float64       `json:"top_p"`
	TopK                *int           `json:"top_k"`
	Seed                *int64         `json:"seed"`
	Stop                stopList       `json:"stop"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	N                   *int           `json:"n"`
	ReasoningEffort     *string        `json:"reasoning_effort"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model         string         `json:"model"`
	Prompt        prompt         `json:"prompt"`
	MaxTokens     *int           `json:"max_tokens"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	TopK          *int           `json:"top_k"`
	Seed          *int64         `json:"seed"`
	Stop          stopList       `json:"stop"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	N             *int           `json:"n"`
	Echo          bool           `json:"echo"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message; content is a string or a list of text parts.
type chatMessage struct {
	Role             string      `json:"role"`
	Content          textContent `json:"content"`
	ReasoningContent string      `json:"reasoning_content"`
}

// textContent is a message's content: a string, null, or [{"type":"text","text":...}].
type textContent struct {
	Text string
}

func (c *textContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		for i, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return fmt.Errorf("content part %d is of type %q: only text parts are supported", i, p.Type)
			}
			c.Text += *p.Text
		}
		return nil
	}
	return fmt.Errorf("content must be a string or a list of text parts")
}

// stopList is "stop": a string, a list of strings, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("stop must be a string or a list of strings")
	}
	*s = list
	return nil
}

// prompt is /v1/completions' "prompt": a string, a list of one string, or
// a list of token ids.
type prompt struct {
	Text  string
	IDs   []int64
	IsIDs bool
	Set   bool
}

func (p *prompt) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	p.Set = true
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &p.Text)
	}
	var strs []string
	if err := json.Unmarshal(b, &strs); err == nil {
		if len(strs) != 1 {
			return fmt.Errorf("prompt: a list of %d prompts; this server answers one prompt per request", len(strs))
		}
		p.Text = strs[0]
		return nil
	}
	var ids []int64
	if err := json.Unmarshal(b, &ids); err == nil && len(ids) > 0 {
		p.IDs, p.IsIDs = ids, true
		return nil
	}
	return fmt.Errorf("prompt must be a string, a list of one string or a list of token ids")
}

// usage is the token count block.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chatResponse is a non-streaming chat completion.
type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Message      *chatOut  `json:"message,omitempty"`
	Delta        *chatOut  `json:"delta,omitempty"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

// chatOut is a response message or a streamed delta.
type chatOut struct {
	Role             string  `json:"role,omitempty"`
	Content          *string `json:"content,omitempty"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// completionResponse is a text completion (also each streamed chunk).
type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage"`
}

type completionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

// modelList is GET /v1/models.
type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
