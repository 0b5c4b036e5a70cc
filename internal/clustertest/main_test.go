package clustertest_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain fails a passing run that leaves anything behind: a node or
// redis-server process still running (or not reaped), or goroutines of
// the test process (clients, streams, routers) still running.
func TestMain(m *testing.M) {
	goroutines := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := leftBehind(goroutines, 10*time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "clustertest: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leftBehind waits up to timeout for the child processes to be gone and
// the goroutines to be back to the count at the start.
func leftBehind(goroutines int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		kids := children()
		n := runtime.NumGoroutine()
		if len(kids) == 0 && n <= goroutines {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("left behind after the tests: child processes %v; %d goroutines (%d at the start):\n%s", kids, n, goroutines, buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// children lists the processes whose parent is this one, as "pid (name)
// state".
func children() []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil // not Linux: nothing to check
	}
	me := os.Getpid()
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me {
			out = append(out, fmt.Sprintf("%d %s %s", pid, s[strings.IndexByte(s, '(')+0:i+1], f[0]))
		}
	}
	return out
}
