// Command compile builds the DeepSeek V4.1 text model as typed IR graphs
// (prefill and decode), verifies and optimises them, and writes a plan that
// `exec` runs.
//
//	compile -model DIR -o model.plan
//	compile -config config.json -explain
package main
