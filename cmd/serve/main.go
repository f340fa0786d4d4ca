// Command serve answers the OpenAI API (chat and text completions, JSON
// and Server-Sent Events) on a compiled plan, with continuous batching:
// concurrent requests share decode steps (package serve).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	_ "github.com/ds4go/ds4/backends/cpu"
	_ "github.com/ds4go/ds4/backends/cuda"
	_ "github.com/ds4go/ds4/backends/gorgonia"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/plan"
	"github.com/ds4go/ds4/serve"
	"github.com/ds4go/ds4/tokenizer"
)

// main runs serve; SIGINT and SIGTERM drain it (run), so cli.Main's
// handler, which exits at once, is not installed.
func main() { os.Exit(cli.Run("serve", run, os.Args[1:])) }

const usage = `serve -plan FILE [-model DIR] [-backend NAME] [-addr HOST:PORT] [-max-batch N] [-max-queue N] [-max-tokens N]
             [-max-len N] [-prefill-chunk N] [-prefill-tokens N] [-request-timeout D] [-drain-timeout D] [-tokenizer FILE] [-model-name NAME] [-thinking] [-max-memory BYTES]`

type options struct {
	plan, model, backend, addr, tokenizer, name string
	maxBatch, maxQueue, maxTokens, maxLen       int
	prefillChunk, prefillTokens                 int
	requestTimeout, drainTimeout                time.Duration
	thinking                                    bool
	maxMemory                                   int64
}

// maxCount bounds the count flags: far above what memory holds.
const maxCount = 1 << 30

func newFlags(o *options) *flag.FlagSet {
	fs := cli.NewFlagSet("serve", usage)
	fs.StringVar(&o.plan, "plan", "", "plan file written by compile (required)")
	fs.StringVar(&o.model, "model", "", "checkpoint directory (default: the one recorded in the plan)")
	fs.StringVar(&o.backend, "backend", "", "backend to run on (default: the one the plan records)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json to use (default: the checkpoint's)")
	fs.StringVar(&o.name, "model-name", "", "the model id requests name (default: the plan's model, else ds4)")
	fs.IntVar(&o.maxBatch, "max-batch", 4, "sequences decoded together (slots of the batch)")
	fs.IntVar(&o.maxQueue, "max-queue", 0, "requests waiting for a slot before 429 (default: 4 × -max-batch)")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "largest max_tokens of a request (default: -max-len)")
	fs.IntVar(&o.maxLen, "max-len", 0, "positions of a slot, prompt + answer (default: the config's max_seq_len)")
	fs.IntVar(&o.prefillChunk, "prefill-chunk", engine.DefaultPrefillChunk, "prefill a longer prompt in calls of at most `N` tokens (memory of a chunk, not of the prompt; the same results); 0: one call")
	fs.IntVar(&o.prefillTokens, "prefill-tokens", serve.DefaultPrefillTokens, "waiting requests join a decode step until their prompts reach `N` tokens (at least one joins): larger admits a burst in fewer steps, the running streams waiting longer in each")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 10*time.Minute, "per request, queue included (0: none)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long in-flight requests may finish before they are cancelled")
	fs.BoolVar(&o.thinking, "thinking", false, "chat requests think (reasoning_content) unless they set reasoning_effort \"none\"; without it, only those that set reasoning_effort")
	fs.Func("max-memory", "refuse a batch needing more than `BYTES` bytes (e.g. 512M, 8G; default: MemAvailable)", func(v string) (err error) {
		o.maxMemory, err = engine.ParseBytes(v)
		if err == nil && o.maxMemory == 0 {
			err = fmt.Errorf("must be > 0")
		}
		return err
	})
	return fs
}

func (o *options) check() error {
	if o.plan == "" {
		return fmt.Errorf("-plan is required (make one with: compile -model DIR -o FILE)")
	}
	for _, err := range []error{
		cli.IntRange("max-batch", int64(o.maxBatch), 1, maxCount, "far above what memory holds"),
		cli.IntRange("max-queue", int64(o.maxQueue), 0, maxCount, "far above what memory holds"),
		cli.IntRange("max-tokens", int64(o.maxTokens), 0, maxCount, "far above what memory holds"),
		cli.IntRange("max-len", int64(o.maxLen), 0, maxCount, "far above what memory holds"),
		cli.IntRange("prefill-chunk", int64(o.prefillChunk), 0, maxCount, "far above what memory holds"),
		cli.IntRange("prefill-tokens", int64(o.prefillTokens), 1, maxCount, "far above what memory holds"),
	} {
		if err != nil {
			return err
		}
	}
	if o.requestTimeout < 0 || o.drainTimeout < 0 {
		return fmt.Errorf("-request-timeout and -drain-timeout must be ≥ 0")
	}
	return nil
}

func run(args []string) error {
	var o options
	fs := newFlags(&o)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	p, err := plan.Read(o.plan)
	if err != nil {
		return err
	}
	dir, fromPlan := o.model, false
	if dir == "" {
		dir, fromPlan = p.ModelDir, true
	}
	if dir == "" {
		return fmt.Errorf("plan %s was compiled shape-only: give -model DIR", o.plan)
	}
	wrap := func(err error) error {
		if fromPlan && err != nil && strings.Contains(err.Error(), dir) {
			return fmt.Errorf("model directory %s recorded in plan %s (give -model DIR if it moved): %w", dir, o.plan, err)
		}
		return err
	}
	cfg, err := engine.CheckPlan(p, dir)
	if err != nil {
		return wrap(err)
	}
	if o.tokenizer == "" {
		o.tokenizer = filepath.Join(dir, "tokenizer.json")
	}
	tok, err := tokenizer.Load(o.tokenizer)
	if err != nil {
		return wrap(err)
	}
	if o.maxLen == 0 {
		o.maxLen = cfg.MaxSeqLen
	}
	if p.MaxBatch > 0 && o.maxBatch > p.MaxBatch {
		return fmt.Errorf("-max-batch %d exceeds the plan's max_batch %d (recompile with a larger -max-batch)", o.maxBatch, p.MaxBatch)
	}
	backend := engine.PlanBackend(p, o.backend)
	model, err := engine.Open(p.Module, dir, backend)
	if err != nil {
		return wrap(err)
	}
	defer model.Close()
	if n := tok.VocabSize(); n > model.Vocab {
		return fmt.Errorf("%s: %d token ids, more than the model's vocabulary of %d", o.tokenizer, n, model.Vocab)
	}
	eng, kind, err := openEngine(model, o)
	if err != nil {
		return err
	}
	defer eng.Close()
	name := o.name
	if name == "" {
		name = p.Model
	}
	srv, err := serve.New(serve.Config{Engine: eng, Tokenizer: tok, ModelName: name, Vocab: model.Vocab, MaxSeqLen: o.maxLen,
		MaxQueue: o.maxQueue, MaxTokens: o.maxTokens, PrefillTokens: o.prefillTokens, RequestTimeout: o.requestTimeout, Thinking: o.thinking,
		Logger: log.New(os.Stderr, "serve: ", log.LstdFlags|log.Lmicroseconds)})
	if err != nil {
		return err
	}
	// From here SIGINT and SIGTERM drain the server (before, they end the
	// process at once: nothing is served yet).
	sig, stopSig := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSig()
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		srv.Close()
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	gc := serve.TuneGC()
	fmt.Fprintf(os.Stderr, "serve: %s on %s (%s, %d slots of %d positions, %s, GC at %d%%) at http://%s\n", name, backend, kind, eng.Slots(), o.maxLen, dir, gc, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		srv.Close()
		return err
	case <-sig.Done():
	}
	stopSig() // a second signal ends the process at once
	fmt.Fprintf(os.Stderr, "serve: shutting down: in-flight requests have %v to finish\n", o.drainTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), o.drainTimeout)
	defer cancel()
	// While the requests drain, the listener stays open: new requests and
	// /health get 503 (a load balancer sees the server leave).
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "serve: drain timeout: the requests left were cancelled\n")
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelClose()
	hs.Shutdown(closeCtx)
	hs.Close()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// closingEngine is an Engine that holds memory until closed.
type closingEngine interface {
	serve.Engine
	Close() error
}

// openEngine is the engine's batch: continuous batching where the backends
// run rows at different positions in one call, otherwise one session per
// slot (the sequences then share nothing but the weights).
func openEngine(m *engine.Model, o options) (closingEngine, string, error) {
	b, err := m.NewBatch(engine.BatchOptions{Slots: o.maxBatch, MaxLen: o.maxLen, MaxMemory: o.maxMemory, PrefillChunk: o.prefillChunk})
	if err != nil {
		return nil, "", err
	}
	if b.Ragged() {
		return b, "continuous batching", nil
	}
	return b, "one session per slot: the backends do not run rows at different positions", nil
}
