// Package backends defines what an executor of IR graphs provides and keeps
// the registry of the available ones. Backends register from init(), like
// database/sql drivers; commands pick one by name.
package backends
