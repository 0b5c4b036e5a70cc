package main

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Where a server's CPU goes: every function of a CPU profile, by its own
// time, in exactly one bucket chosen by its name.

// cpuBucket is one part of a server's CPU.
type cpuBucket struct {
	key, name string
	// what says which functions it holds, for the page.
	what string
}

// cpuBuckets are the buckets, in the order of the page.
var cpuBuckets = []cpuBucket{
	{"ours", "mcpcluster's code", "`github.com/mcpcluster/mcpcluster/...` and the node's `main`"},
	{"peer", "the peer's library", "`github.com/mark3labs/mcp-go`, `github.com/modelcontextprotocol/go-sdk`, the peer's `main` and `bench/peers`"},
	{"redis", "Redis client", "`github.com/redis/go-redis` (its OpenTelemetry hooks are telemetry)"},
	{"json", "JSON", "`encoding/json`, go-sdk's `github.com/segmentio/encoding` and `segmentio/asm`, JSON Schema validation (`github.com/google/jsonschema-go`, `santhosh-tekuri/jsonschema`)"},
	{"http", "HTTP and I/O", "`net/http`, `net/textproto`, `net/url`, `net`, `internal/poll`, `bufio`, `io`, `mime`, `github.com/go-chi/chi`, `golang.org/x/net`"},
	{"syscall", "system calls", "time in the kernel: `syscall`, `internal/runtime/syscall`, `golang.org/x/sys/unix`, and the runtime's own system calls (`runtime.futex` waking and parking threads, `epollwait`, `usleep`, `osyield`, `madvise`, `mmap`…), which the scheduler and the allocator make"},
	{"gc", "memory and GC", "allocation, zeroing and garbage collection: `runtime.mallocgc*`, `newobject`, `makeslice`, `growslice`, `runtime.gc*`, `internal/runtime/gc`, `scanobject` and the other `scan*`, `greyobject`, `findObject`, `markroot*`, `wbBuf*` (write barriers), `memclr*`, `sweep*`, the heap's types (`(*mspan)`, `(*mheap)`, `(*mcache)`, `(*mcentral)`, `(*gcWork)`, `(*pageAlloc)`…)"},
	{"runtime", "scheduler and runtime other", "the rest of `runtime` and `internal/runtime` (scheduler, channels, timers, stack growth, maps, `memmove`), the runtime's assembly (`aeshashbody`, `memeqbody`, `cmpbody`…), `sync`, `sync/atomic`, `internal/sync`"},
	{"telemetry", "telemetry", "`go.opentelemetry.io`, `github.com/redis/go-redis/extra/redisotel`, `github.com/felixge/httpsnoop`, `github.com/rs/zerolog`, `github.com/prometheus`, `log`, `log/slog`"},
	{"other", "everything else", "the standard library's other packages (`reflect`, `strconv`, `strings`, `bytes`, `fmt`, `context`, `time`, `crypto/...`, `internal/bytealg`…) and other modules (`github.com/google/uuid`, `github.com/spf13/cast`…)"},
}

// runtimeSyscalls are the runtime's functions that are a system call
// themselves (their samples are the kernel's time).
var runtimeSyscalls = map[string]bool{
	"futex": true, "usleep": true, "usleep_no_g": true, "osyield": true, "osyield_no_g": true,
	"write1": true, "read": true, "madvise": true, "mmap": true, "sysMmap": true, "munmap": true, "sysMunmap": true,
	"mincore": true, "rtsigprocmask": true, "rt_sigaction": true, "sigaltstack": true, "tgkill": true, "getpid": true,
	"raise": true, "raiseproc": true, "clone": true, "exitThread": true, "nanosleep": true, "epollwait": true,
	"epollctl": true, "epollcreate1": true, "sched_getaffinity": true, "setitimer": true, "timer_create": true,
	"timer_settime": true, "timer_delete": true, "open": true, "closefd": true, "pipe2": true, "gettid": true,
}

// gcPrefixes are the runtime's allocation and garbage collection
// functions (after "runtime.").
var gcPrefixes = []string{
	"mallocgc", "newobject", "newarray", "makeslice", "growslice", "makeslicecopy", "rawstring", "rawbyteslice", "rawruneslice",
	"nextFree", "gc", "scan", "greyobject", "findObject", "markroot", "markBits", "heapBits", "heapSetType", "typePointers",
	"(*typePointers)", "wbBuf", "(*wbBuf)", "wbMove", "wbZero", "bulkBarrier", "memclr", "sweep", "bgsweep", "bgscavenge",
	"deductAssistCredit", "shade", "spanOf", "spanClass", "pageIndexOf", "arenaIndex", "roundupsize", "publicationBarrier",
	"profilealloc", "mProf_", "tryDeferToSpanScan", "writeHeapBits", "persistentalloc", "sysAlloc", "sysUsed", "sysUnused",
	"(*mspan)", "(*mheap)", "(*mcache)", "(*mcentral)", "(*gcWork)", "(*gcBits)", "(*gcControllerState)", "(*gcCPULimiterState)",
	"(*pageAlloc)", "(*pallocBits)", "(*pallocData)", "(*spanSet)", "(*spanSetBlockAlloc)", "(*sweepLocked)", "(*sweepLocker)",
	"(*activeSweep)", "(*mSpanList)", "(*mSpanStateBox)", "(*fixalloc)", "(*linearAlloc)", "(*scavengerState)", "(*scavengeIndex)",
	"(*spanQueue)", "(*spanInlineMarkBits)", "(*gcMarkWorker", "(*limiterEvent)", "(*mspanInlineMarkBits)", "(*heapArena)",
}

// prefixBuckets map a function name's prefix to its bucket, checked in
// order (the first match wins).
var prefixBuckets = []struct{ prefix, bucket string }{
	{"github.com/redis/go-redis/extra/redisotel", "telemetry"},
	{"github.com/redis/go-redis", "redis"},
	{"github.com/mcpcluster/mcpcluster/bench/", "peer"},
	{"github.com/mcpcluster/mcpcluster", "ours"},
	{"github.com/mark3labs/mcp-go", "peer"},
	{"github.com/modelcontextprotocol/go-sdk", "peer"},
	{"encoding/json", "json"},
	{"github.com/segmentio/encoding", "json"},
	{"github.com/segmentio/asm", "json"},
	{"github.com/google/jsonschema-go", "json"},
	{"github.com/santhosh-tekuri/jsonschema", "json"},
	{"go.opentelemetry.io", "telemetry"},
	{"github.com/felixge/httpsnoop", "telemetry"},
	{"github.com/rs/zerolog", "telemetry"},
	{"github.com/prometheus", "telemetry"},
	{"log.", "telemetry"},
	{"log/slog", "telemetry"},
	{"syscall.", "syscall"},
	{"internal/runtime/syscall", "syscall"},
	{"golang.org/x/sys/unix", "syscall"},
	{"net/", "http"},
	{"net.", "http"},
	{"vendor/golang.org/x/net/", "http"},
	{"golang.org/x/net/", "http"},
	{"internal/poll.", "http"},
	{"bufio.", "http"},
	{"io.", "http"},
	{"mime", "http"},
	{"github.com/go-chi/chi", "http"},
	{"internal/runtime/gc", "gc"},
	{"internal/runtime/", "runtime"},
	{"internal/sync.", "runtime"},
	{"sync.", "runtime"},
	{"sync/atomic.", "runtime"},
}

// runtimeAsm are the runtime's assembly routines, named without a
// package.
var runtimeAsm = map[string]bool{
	"aeshashbody": true, "memeqbody": true, "cmpbody": true, "indexbytebody": true, "countbody": true,
	"gogo": true, "gosave_systemstack_switch": true, "callRet": true,
}

// bucketOf puts a function of a CPU profile in its bucket; ours says
// whether the profiled server is mcpcluster's node (whose `main` is
// ours) or a peer (whose `main` is the peer's).
func bucketOf(fn string, ours bool) string {
	fn = strings.TrimSuffix(fn, " (inline)")
	if strings.HasPrefix(fn, "main.") {
		if ours {
			return "ours"
		}
		return "peer"
	}
	if rest, ok := strings.CutPrefix(fn, "runtime."); ok {
		name, _, _ := strings.Cut(rest, ".")
		if runtimeSyscalls[name] {
			return "syscall"
		}
		for _, p := range gcPrefixes {
			if strings.HasPrefix(rest, p) && !strings.HasPrefix(rest, "gcount") {
				return "gc"
			}
		}
		return "runtime"
	}
	for _, pb := range prefixBuckets {
		if strings.HasPrefix(fn, pb.prefix) {
			return pb.bucket
		}
	}
	if runtimeAsm[fn] {
		return "runtime"
	}
	return "other"
}

// flatCost is a function's own CPU time in a profile.
type flatCost struct {
	fn      string
	seconds float64
}

// flatProfile is a CPU profile read by pprofFlat.
type flatProfile struct {
	// duration is how long the profile sampled, samples the CPU time
	// it holds (seconds).
	duration, samples float64
	funcs             []flatCost
}

// pprofFlat lists every function of a CPU profile by own time.
func pprofFlat(path string) (*flatProfile, error) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-flat", "-nodecount=1000000", "-nodefraction=0", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof %s: %w", filepath.Base(path), err)
	}
	return parsePprofFlat(string(out))
}

// parsePprofFlat reads `go tool pprof -top`'s text: the header's
// duration and total samples, and each function's own time.
func parsePprofFlat(out string) (*flatProfile, error) {
	header, rows, ok := pprofTable(out)
	if !ok {
		return nil, fmt.Errorf("no table in pprof's output")
	}
	fp := &flatProfile{}
	for _, line := range header {
		if d, ok := strings.CutPrefix(line, "Duration: "); ok {
			// "8.01s, Total samples = 6.50s (81.14%)"
			dur, rest, _ := strings.Cut(d, ", ")
			fp.duration, _ = parseSeconds(dur)
			if tot, ok := strings.CutPrefix(rest, "Total samples = "); ok {
				tot, _, _ = strings.Cut(tot, " ")
				fp.samples, _ = parseSeconds(tot)
			}
		}
	}
	for _, r := range rows {
		v, err := parseSeconds(r.f[0])
		if err != nil {
			return nil, fmt.Errorf("pprof row of %q: %w", r.fn, err)
		}
		if v > 0 {
			fp.funcs = append(fp.funcs, flatCost{r.fn, v})
		}
	}
	return fp, nil
}

// parseSeconds reads a pprof time ("0", "10ms", "1.20s", "2.5mins").
func parseSeconds(s string) (float64, error) {
	if s == "0" {
		return 0, nil
	}
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"ns", 1e-9}, {"us", 1e-6}, {"µs", 1e-6}, {"ms", 1e-3}, {"mins", 60}, {"min", 60}, {"hrs", 3600}, {"hr", 3600}, {"s", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return 0, fmt.Errorf("time %q: %w", s, err)
			}
			return v * u.scale, nil
		}
	}
	return 0, fmt.Errorf("time %q: no unit", s)
}

// bucketCost is a bucket's CPU in one profile.
type bucketCost struct {
	Bucket  string  `json:"bucket"`
	Seconds float64 `json:"cpu_s"`
	// Micros is CPU per operation: Seconds over the operations of the
	// profile's window.
	Micros float64 `json:"us_per_op"`
	// Top are its largest functions by own time ("name 0.12s").
	Top []string `json:"top,omitempty"`
}

// bucketTop is how many of each bucket's functions are kept.
const bucketTop = 3

// classify sums a profile's functions by bucket (every bucket, in
// cpuBuckets' order), dividing each by ops for CPU per operation.
func classify(fp *flatProfile, ours bool, ops float64) []bucketCost {
	byKey := map[string]*bucketCost{}
	out := make([]bucketCost, len(cpuBuckets))
	for i, b := range cpuBuckets {
		out[i].Bucket = b.key
		byKey[b.key] = &out[i]
	}
	funcs := append([]flatCost(nil), fp.funcs...)
	sort.SliceStable(funcs, func(i, j int) bool { return funcs[i].seconds > funcs[j].seconds })
	for _, f := range funcs {
		b := byKey[bucketOf(f.fn, ours)]
		b.Seconds += f.seconds
		if len(b.Top) < bucketTop {
			b.Top = append(b.Top, fmt.Sprintf("%s %.2fs", strings.TrimSuffix(f.fn, " (inline)"), f.seconds))
		}
	}
	for i := range out {
		if ops > 0 {
			out[i].Micros = round(out[i].Seconds*1e6/ops, 2)
		}
		out[i].Seconds = round(out[i].Seconds, 3)
	}
	return out
}

// round rounds v to digits decimals (sums of samples carry float
// noise).
func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
