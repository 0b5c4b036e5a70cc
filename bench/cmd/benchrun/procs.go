package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// proc is a child process: a server node, a peer or a redis-server.
type proc struct {
	name string
	cmd  *exec.Cmd
	logs *tailBuffer
	done chan struct{}
}

// startProc starts bin and waits until a line of its stdout contains
// ready (or, with ready empty, until it accepts connections on addr).
func startProc(name, bin string, args []string, ready, addr string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	// A child never outlives benchrun, even one that crashed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logs := &tailBuffer{max: 64 << 10}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logs: logs, done: make(chan struct{})}
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := ready == ""
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.Contains(sc.Text(), ready) {
				close(seen)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.After(30 * time.Second)
	if ready == "" {
		go func() {
			for {
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					c.Close()
					close(seen)
					return
				}
				select {
				case <-p.done:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	select {
	case <-seen:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited at start:\n%s", name, logs.String())
	case <-deadline:
		p.stop()
		return nil, fmt.Errorf("%s not ready after 30s:\n%s", name, logs.String())
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and, after 5 s, SIGKILL.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max/2:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(t.b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startRedis runs a throwaway redis-server on a free loopback port,
// keeping nothing on disk.
func startRedis(name, dir string) (*proc, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("redis-server not found (Debian: apt-get install redis-server): %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	rdir := filepath.Join(dir, name)
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return nil, "", err
	}
	p, err := startProc(name, bin, []string{
		"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", rdir, "--daemonize", "no", "--loglevel", "warning", "--maxclients", "20000",
	}, "", addr)
	if err != nil {
		return nil, "", err
	}
	url := "redis://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bench.WaitRedis(ctx, url); err != nil {
		p.stop()
		return nil, "", fmt.Errorf("%s does not answer PING: %w", name, err)
	}
	return p, url, nil
}

// startReplica starts a redis-server that replicates the one at
// primaryURL, and waits until it is in sync.
func startReplica(name, dir, primaryURL string) (*proc, error) {
	p, url, err := startRedis(name, dir)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(primaryURL, "redis://"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pp, err := bench.DialRedis(ctx, primaryURL)
	if err == nil {
		_, err = pp.Do(ctx, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
		pp.Close()
	}
	rp, err2 := bench.DialRedis(ctx, url)
	if err == nil {
		err = err2
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer rp.Close()
	if _, err := rp.Do(ctx, "REPLICAOF", host, port); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: REPLICAOF: %w", name, err)
	}
	for {
		info, err := rp.Do(ctx, "INFO", "replication")
		if err == nil && strings.Contains(fmt.Sprint(info), "master_link_status:up") {
			return p, nil
		}
		if ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("%s did not sync with its primary: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// randomKey returns 32 random bytes as hex (a --state-key).
func randomKey() string {
	b := make([]byte, 32)
	f, err := os.Open("/dev/urandom")
	if err == nil {
		_, _ = io.ReadFull(f, b)
		f.Close()
	}
	return hex.EncodeToString(b)
}

// procStatus reads a field of /proc/PID/status in kB ("VmRSS", "VmHWM").
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// socketsTo counts the TCP connections process pid has open to port on
// loopback: its socket inodes (/proc/PID/fd) matched against the
// established connections in /proc/net/tcp.
func socketsTo(pid, port int) (int, error) {
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		f := strings.Fields(string(line))
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "01" { // 01: ESTABLISHED
			continue
		}
		if strings.HasSuffix(f[2], want) && inodes[f[9]] {
			n++
		}
	}
	return n, nil
}
