package tests

// serve driven by a client of another language: testdata/serve_client.py
// (python3, standard library only) streams a chat completion and a text
// completion over SSE; its text must equal the Go client's.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

func TestServePythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	fx := startServe(t, serveOpts{slots: 2, queue: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script := filepath.Join(repoRoot(), "tests", "testdata", "serve_client.py")
	const prompt = "Write a line about rivers."
	for _, completions := range []bool{false, true} {
		c := fx.client()
		var want, wantFinish string
		if completions {
			r, err := c.Completions.New(ctx, openai.CompletionNewParams{
				Model:       openai.CompletionNewParamsModel(fx.model),
				Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
				MaxTokens:   openai.Int(12),
				Temperature: openai.Float(0),
			})
			if err != nil {
				t.Fatal(err)
			}
			want, wantFinish = r.Choices[0].Text, string(r.Choices[0].FinishReason)
		} else {
			r, err := c.Chat.Completions.New(ctx, sdkChat(fx.model, prompt, 12))
			if err != nil {
				t.Fatal(err)
			}
			want, wantFinish = r.Choices[0].Message.Content, r.Choices[0].FinishReason
		}
		args := []string{script, fx.url, fx.model, prompt, "--max-tokens", "12"}
		if completions {
			args = append(args, "--completions")
		}
		cmd := exec.CommandContext(ctx, py, args...)
		cmd.Env = append(os.Environ(), "PYTHONIOENCODING=utf-8", "PYTHONDONTWRITEBYTECODE=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("serve_client.py (completions %v): %v\n%s", completions, err, stderr.String())
		}
		t.Logf("python (completions %v): %q; %s", completions, out, strings.TrimSpace(stderr.String()))
		if string(out) != want {
			t.Errorf("python client (completions %v) printed %q, the Go client got %q", completions, out, want)
		}
		if !strings.Contains(stderr.String(), "finish_reason="+wantFinish+" ") || !strings.Contains(stderr.String(), `"completion_tokens"`) {
			t.Errorf("python client (completions %v): %q, want finish_reason=%s and the usage", completions, stderr.String(), wantFinish)
		}
	}
}
