// Command exec loads a plan and a checkpoint and generates tokens.
//
//	exec -plan model.plan -prompt-ids "1,2,3;4,5,6" -max-new-tokens 16
//	exec -plan model.plan -trace-in golden.safetensors -trace-out trace.safetensors
package main
