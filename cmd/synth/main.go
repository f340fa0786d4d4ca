package main

import (
	"fmt"

	"github.com/ds4go/ds4/internal/cli"
	"github.com/ds4go/ds4/internal/fileio"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/synth"
)

func main() { cli.Main("synth", run) }

func run(args []string) error {
	fs := cli.NewFlagSet("synth", "synth -config FILE -o DIR [-seed N] [-shard-mb MB] [-workers N]")
	config := fs.String("config", "", "model config (flat inference config.json or HF config.json; a directory reads its config.json) (required)")
	out := fs.String("o", "", "output directory (created if needed) (required)")
	seed := fs.Uint64("seed", 1, "weight seed")
	shardMB := fs.Int64("shard-mb", 1024, "largest shard, in MiB")
	workers := fs.Int("workers", 0, "generator goroutines (0 = all CPUs)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *config == "" {
		return fmt.Errorf("-config is required")
	}
	if *out == "" {
		return fmt.Errorf("-o is required")
	}
	if *shardMB <= 0 {
		return fmt.Errorf("-shard-mb %d: must be > 0", *shardMB)
	}
	if *workers < 0 {
		return fmt.Errorf("-workers %d: must be >= 0", *workers)
	}
	c, err := deepseekv4.LoadConfig(*config)
	if err != nil {
		return err
	}
	if err := fileio.CheckOutputDir(*out); err != nil {
		return fmt.Errorf("-o %v", err)
	}
	rep, err := synth.Generate(*out, c, *seed, synth.Options{ShardBytes: *shardMB << 20, Workers: *workers})
	if err != nil {
		return err
	}
	fmt.Println("synth:", rep)
	return nil
}
