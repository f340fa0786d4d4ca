// Package tests holds the end-to-end tests: block-local parity with the
// reference's golden data, free-running sanity, and command-line behaviour.
package tests
