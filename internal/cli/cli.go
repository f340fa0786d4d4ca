package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ds4go/ds4/internal/fileio"
)

// Internal marks an error as a bug of this tool rather than bad input.
type Internal struct{ Err error }

func (e *Internal) Error() string { return e.Err.Error() }

// Main runs fn and exits with the right status. SIGINT and SIGTERM end the
// command at once: its temporary files and directories are removed
// (internal/fileio), one line says so, and the status is 130 or 143.
func Main(name string, fn func(args []string) error) {
	onSignal(name)
	os.Exit(Run(name, fn, os.Args[1:]))
}

// onSignal installs the handler of SIGINT and SIGTERM.
func onSignal(name string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		fileio.RemoveTemporaries()
		if s == syscall.SIGTERM {
			fmt.Fprintf(os.Stderr, "%s: terminated\n", name)
			os.Exit(128 + int(syscall.SIGTERM))
		}
		fmt.Fprintf(os.Stderr, "%s: interrupted\n", name)
		os.Exit(128 + int(syscall.SIGINT))
	}()
}

// Run runs fn and returns the exit status (Main without the exit, for
// tests). The files fn reads are recorded as its inputs, which its outputs
// may not overwrite (internal/fileio).
func Run(name string, fn func(args []string) error, args []string) (code int) {
	defer fileio.RecordInputs()()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "%s: internal error: %v (please report this)\n", name, oneLine(fmt.Sprint(r)))
			code = 1
		}
	}()
	err := fn(args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	var in *Internal
	if errors.As(err, &in) {
		fmt.Fprintf(os.Stderr, "%s: internal error: %s (please report this)\n", name, oneLine(err.Error()))
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, oneLine(err.Error()))
	return 2
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// NewFlagSet returns a flag set that reports errors instead of exiting and
// keeps its usage text out of the one-line error.
func NewFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses flags; a flag error becomes one line naming the flag.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(discard{})
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fs.Usage()
		return err
	}
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags go before arguments; see -h)", fs.Arg(0))
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
