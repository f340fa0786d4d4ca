// Command synth writes a random checkpoint in the released DeepSeek-V4.1
// format for a config: config.json, sharded safetensors with their index,
// and the Engram token map.
//
//	synth -config bench/configs/mini.json -o /tmp/mini -seed 1 -shard-mb 1024
package main
