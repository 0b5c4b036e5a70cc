// Command appendcost measures what appending one event to a stream's
// history costs Redis: the backend's append script and variants of it,
// replayed against a redis-server of its own (started on a free loopback
// port and stopped at the end), side by side in rounds. It prints the
// tables of docs/BENCHMARKS.md's "What an appended event costs Redis";
// --json writes the figures, which benchrun renders.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpcluster/mcpcluster/bench/appendcost"
)

func main() {
	opt := appendcost.DefaultOptions()
	flag.IntVar(&opt.Rounds, "rounds", opt.Rounds, "rounds of every variant in every mode (the median is reported)")
	flag.DurationVar(&opt.Window, "window", opt.Window, "length of each back-to-back measurement")
	flag.DurationVar(&opt.Paced, "paced", opt.Paced, "length of each paced measurement (one event every 20 ms)")
	jsonPath := flag.String("json", "", "write the figures to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := appendcost.Measure(ctx, opt)
	if res.Err != "" {
		fmt.Fprintln(os.Stderr, "appendcost:", res.Err)
		os.Exit(1)
	}
	fmt.Printf("%s; Redis idle: %.0f µs of CPU per second\n\n", res.Redis, res.IdleUsPerSec)
	res.WriteTables(os.Stdout)
	if *jsonPath != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "appendcost:", err)
			os.Exit(1)
		}
	}
}
