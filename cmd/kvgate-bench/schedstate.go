package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/kvgate/kvgate/perf/schedstate"
)

// cmdSchedstate summarizes Go execution traces (perf/schedstate): how
// long goroutines ran, waited for a P, made system calls, or waited in an
// event poller holding a P. perf/scripts/schedstate.sh takes the traces
// from kvgate under load.
func cmdSchedstate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schedstate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cpus := fs.Int("cpus", runtime.NumCPU(), "CPUs the traced process had (the starved share is taken against them)")
	detail := fs.Int("detail", 0, "also the Ps held by each poller and what waited on them, this many of each (0: none)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: kvgate-bench schedstate [--cpus N] [--detail N] TRACE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("schedstate: no trace given")
	}
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		s, err := schedstate.Read(f, *cpus)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(stdout, "%s: %s\n", path, s)
		if *detail > 0 {
			s.Detail(stdout, *detail)
		}
	}
	return nil
}
