// Package fileio is how the commands touch the files a person names: it
// reads inputs boundedly, writes outputs without destroying anything that
// is not theirs, and cleans up after an interrupted or failed command.
//
// Inputs. Open and ReadFile accept regular files only: the open does not
// block (a FIFO cannot stall it), a directory answers "is a directory", a
// device or FIFO "not a regular file", and ReadFile refuses a file above
// the limit its caller states. While a command runs (RecordInputs, called
// by internal/cli) every file opened is remembered by identity.
//
// Outputs. WriteFile replaces a regular file atomically (a temporary file in
// the same directory, synced and renamed; a symbolic link keeps pointing at
// the replaced file) and writes a character or block device directly, as cp
// does, so /dev/null swallows the data and /dev/full reports "no space left
// on device". A directory, FIFO or socket is refused, and so is a file that
// is one of the command's inputs. Create and Commit do the same for data
// that is streamed (a CPU profile). CreateDir stages an output directory in a
// temporary directory that Commit moves into place; files that the output
// directory already held and the command does not write are kept.
//
// Cleanup. Temporary files and directories are registered while they
// exist; RemoveTemporaries (internal/cli calls it on SIGINT and SIGTERM)
// removes them. Messages name the path the person gave, never a temporary
// name.
//
//	data, err := fileio.ReadFile("model.plan", 64<<20)
//	err = fileio.WriteFile("out.plan", data) // "out.plan: is a directory", ...
//
//	d, err := fileio.CreateDir("ckpt")
//	err = d.WriteFile("config.json", cfg) // into the staging directory
//	err = d.Commit()                      // or d.Remove() on failure
package fileio
