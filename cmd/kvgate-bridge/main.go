// Command kvgate-bridge puts an unmodified vLLM or SGLang engine behind kvgate.
//
// This binary currently prints its usage; its issue fills it in.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	fs := flag.NewFlagSet("kvgate-bridge", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kvgate-bridge [flags]\n\nBridge: serves the kvgate wire protocol and drives an OpenAI-compatible engine over HTTP, translating its ZMQ KV events.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "kvgate-bridge: not built yet (see its open issue)")
	os.Exit(1)
}
