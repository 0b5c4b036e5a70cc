// Package serve runs a benchmark peer: its MCP handler at /mcp on a
// loopback address, until SIGINT or SIGTERM; with --pprof-addr, also
// net/http/pprof on a listener of its own, so that the benchmark runner
// can profile the peer without touching the benchmarked listener.
package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// pprofAddr is every peer's --pprof-addr: the peer's flag.Parse reads it
// before it calls Run.
var pprofAddr = flag.String("pprof-addr", "", "also serve net/http/pprof at http://ADDR/debug/pprof/ on a loopback listener of its own (127.0.0.1:0: any free port); empty: no profiling endpoint")

// Run serves h at http://addr/mcp and prints the endpoint (the benchmark
// runner waits for the "listening on" line); with --pprof-addr it first
// serves /debug/pprof/ there and prints "pprof on http://ADDR/debug/pprof/".
// It exits the process on a listen or serve error.
func Run(name, addr string, h http.Handler) {
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s listening on http://%s/mcp\n", name, ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// servePprof serves net/http/pprof's handlers on a loopback listener at
// addr, apart from the MCP handler's, and prints where.
func servePprof(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--pprof-addr %s: not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Printf("pprof on http://%s/debug/pprof/\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return nil
}
