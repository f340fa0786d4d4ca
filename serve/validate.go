package serve

import (
	"math"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// maxStops bounds the stop strings of a request (OpenAI allows 4).
const maxStops = 16

// maxStopBytes bounds one stop string: the stream decoder's hold-back test
// costs up to its length squared per token, on the scheduler's goroutine
// (a megabyte-long stop string would stall every stream).
const maxStopBytes = 256

// minTemperature: below it logits / T overflow (exec's bound); such a
// temperature samples greedily.
const minTemperature = 1e-6

// job is a validated request, ready for the scheduler.
type job struct {
	prompt   []int64
	maxNew   int
	sampling engine.Sampling
	seed     uint64
	seeded   bool
	stops    []string
	chat     bool
	thinking bool
	stream   bool
	usage    bool // stream_options.include_usage
}

// common are the fields both endpoints share.
type common struct {
	model       string
	maxTokens   *int
	maxParam    string
	temperature *float64
	topP        *float64
	topK        *int
	seed        *int64
	stop        stopList
	n           *int
}

// check validates the shared fields into j (all but the prompt's length).
func (s *Server) check(c common, j *job) *apiError {
	if c.model == "" {
		return invalid("model", "", "you must provide a model parameter")
	}
	if c.model != s.cfg.ModelName {
		return &apiError{Status: 404, Message: "The model `" + c.model + "` does not exist; this server serves `" + s.cfg.ModelName + "`", Type: typeInvalid, Param: strp("model"), Code: strp("model_not_found")}
	}
	if c.n != nil && *c.n != 1 {
		return invalid("n", "", "n = %d: this server answers one choice per request", *c.n)
	}
	if c.maxTokens != nil {
		if *c.maxTokens <= 0 {
			return invalid(c.maxParam, "", "%s = %d: must be at least 1", c.maxParam, *c.maxTokens)
		}
		if *c.maxTokens > s.cfg.MaxTokens {
			return invalid(c.maxParam, "", "%s = %d: over this server's limit of %d", c.maxParam, *c.maxTokens, s.cfg.MaxTokens)
		}
	}
	if t := c.temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || *t > 2 {
			return invalid("temperature", "", "temperature = %v: must be in [0, 2]", *t)
		}
		if *t >= minTemperature {
			j.sampling.Temperature = *t
		}
	}
	if p := c.topP; p != nil {
		if math.IsNaN(*p) || *p <= 0 || *p > 1 {
			return invalid("top_p", "", "top_p = %v: must be in (0, 1]", *p)
		}
		j.sampling.TopP = *p
	}
	if k := c.topK; k != nil {
		if *k < 0 {
			return invalid("top_k", "", "top_k = %d: must be ≥ 0", *k)
		}
		j.sampling.TopK = *k
	}
	if c.seed != nil {
		j.seed, j.seeded = uint64(*c.seed), true
	}
	if len(c.stop) > maxStops {
		return invalid("stop", "", "%d stop strings: at most %d", len(c.stop), maxStops)
	}
	for _, st := range c.stop {
		if st == "" {
			return invalid("stop", "", "empty stop string")
		}
		if len(st) > maxStopBytes {
			return invalid("stop", "", "a stop string of %d bytes: at most %d", len(st), maxStopBytes)
		}
	}
	j.stops = c.stop
	return nil
}

// defaultCompletionTokens is /v1/completions' max_tokens when a request
// gives none (OpenAI's and vLLM's 16).
const defaultCompletionTokens = 16

// fit checks the prompt against the context and sets maxNew: the request's
// limit, or def cut to the room left.
func (s *Server) fit(j *job, asked *int, param string, def int) *apiError {
	n, limit := len(j.prompt), s.cfg.MaxSeqLen
	if asked != nil {
		if n+*asked > limit {
			return invalid(param, "context_length_exceeded", "the prompt of %d tokens + %s %d exceed the context of %d tokens", n, param, *asked, limit)
		}
		j.maxNew = *asked
		return nil
	}
	if n >= limit {
		return invalid("messages", "context_length_exceeded", "the prompt of %d tokens leaves no room in the context of %d tokens", n, limit)
	}
	j.maxNew = min(def, s.cfg.MaxTokens, limit-n)
	return nil
}

// chatJob validates a chat request.
func (s *Server) chatJob(r *chatRequest) (*job, *apiError) {
	j := &job{chat: true, stream: r.Stream, thinking: s.cfg.Thinking}
	c := common{model: r.Model, maxTokens: r.MaxTokens, maxParam: "max_tokens", temperature: r.Temperature, topP: r.TopP, topK: r.TopK, seed: r.Seed, stop: r.Stop, n: r.N}
	if r.MaxCompletionTokens != nil {
		c.maxTokens, c.maxParam = r.MaxCompletionTokens, "max_completion_tokens"
	}
	if e := s.check(c, j); e != nil {
		return nil, e
	}
	if r.StreamOptions != nil {
		j.usage = r.StreamOptions.IncludeUsage
	}
	if e := r.effort(j); e != nil {
		return nil, e
	}
	if len(r.Messages) == 0 {
		return nil, invalid("messages", "", "messages must hold at least one message")
	}
	msgs := make([]deepseekv4.Message, len(r.Messages))
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "developer":
			m.Role = deepseekv4.RoleSystem
		case deepseekv4.RoleUser, deepseekv4.RoleAssistant:
		default:
			return nil, invalid("messages", "", "messages[%d].role %q: want system, developer, user or assistant", i, m.Role)
		}
		msgs[i] = deepseekv4.Message{Role: m.Role, Content: m.Content.Text, Reasoning: m.ReasoningContent}
	}
	j.prompt = s.tok.Encode(deepseekv4.ChatPrompt(msgs, j.thinking))
	if e := s.fit(j, c.maxTokens, c.maxParam, s.cfg.DefaultMaxTokens); e != nil {
		return nil, e
	}
	return j, nil
}

// effort sets thinking from reasoning_effort: "none" turns it off, any
// other known effort on; absent, the server's default holds.
func (r *chatRequest) effort(j *job) *apiError {
	if r.ReasoningEffort == nil {
		return nil
	}
	switch *r.ReasoningEffort {
	case "none":
		j.thinking = false
	case "minimal", "low", "medium", "high", "max", "xhigh":
		j.thinking = true
	default:
		return invalid("reasoning_effort", "", "reasoning_effort %q: want none, minimal, low, medium, high or max", *r.ReasoningEffort)
	}
	return nil
}

// completionJob validates a completion request.
func (s *Server) completionJob(r *completionRequest) (*job, *apiError) {
	j := &job{stream: r.Stream}
	c := common{model: r.Model, maxTokens: r.MaxTokens, maxParam: "max_tokens", temperature: r.Temperature, topP: r.TopP, topK: r.TopK, seed: r.Seed, stop: r.Stop, n: r.N}
	if e := s.check(c, j); e != nil {
		return nil, e
	}
	if r.StreamOptions != nil {
		j.usage = r.StreamOptions.IncludeUsage
	}
	if r.Echo {
		return nil, invalid("echo", "", "echo is not supported")
	}
	switch {
	case !r.Prompt.Set:
		return nil, invalid("prompt", "", "you must provide a prompt")
	case r.Prompt.IsIDs:
		for i, id := range r.Prompt.IDs {
			if id < 0 || id >= int64(s.cfg.Vocab) {
				return nil, invalid("prompt", "", "prompt[%d] = %d: not a token id of the vocabulary of %d", i, id, s.cfg.Vocab)
			}
		}
		j.prompt = r.Prompt.IDs
	default:
		j.prompt = append([]int64{s.bos}, s.tok.Encode(r.Prompt.Text)...)
	}
	if e := s.fit(j, c.maxTokens, c.maxParam, defaultCompletionTokens); e != nil {
		if e.Param != nil && *e.Param == "messages" {
			e.Param = strp("prompt")
		}
		return nil, e
	}
	return j, nil
}
