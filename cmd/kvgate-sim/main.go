// Command kvgate-sim is a simulated inference engine that speaks the kvgate wire protocol.
//
// This binary currently prints its usage; its issue fills it in.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	fs := flag.NewFlagSet("kvgate-sim", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kvgate-sim [flags]\n\nSimulated inference engine (continuous batching, paged KV cache, prefix caching) serving the kvgate wire protocol.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "kvgate-sim: not built yet (see its open issue)")
	os.Exit(1)
}
