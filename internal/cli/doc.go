// Package cli gives the commands one way to end: a one-line error on stderr
// and exit status 2 for bad input, 1 for an internal error (a recovered
// panic, reported with a request to file it), never a Go panic trace; on
// SIGINT or SIGTERM, exit status 130 or 143 with one line, the temporary
// files of internal/fileio removed.
//
//	func main() { cli.Main("compile", run) }
package cli
