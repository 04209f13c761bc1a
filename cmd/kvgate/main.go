// Command kvgate is the KV-cache-aware router daemon: it terminates OpenAI and
// Anthropic HTTP, tokenizes prompts once, and routes each request to the
// engine that will start it soonest.
//
// The daemon is built in stages; this binary currently parses its command line
// and reports what is not built yet.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kvgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("listen", "127.0.0.1:8080", "public HTTP listen address (OpenAI and Anthropic APIs)")
	fs.String("admin-listen", "127.0.0.1:9090", "admin listen address (/metrics, /debug/state, pprof)")
	fs.String("engine", "", "comma-separated HOST:PORT list of wire-protocol engines")
	fs.Int("sim-engines", 0, "start N simulated engines in-process on loopback instead of --engine")
	fs.String("policy", "kv", "routing policy: kv|round-robin|least-load|session|approx-prefix")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvgate [flags]\n\nRoutes LLM requests to the engine holding the most of their KV cache.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	fmt.Fprintln(stderr, "kvgate: the HTTP daemon is not built yet (see the open daemon issue); the wire protocol is in ./wire")
	return 1
}
