package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlocks returns the sh code blocks of the README section headed
// by title.
func readmeBlocks(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README has no section %q", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// The "Try it" commands work when pasted whole into a shell: the first
// block starts a node and talks to it, the second reuses it. The node
// runs from a built binary on a free port instead of go run on 8080,
// after a second's delay standing for go run's build.
func TestReadmeTryItWorksPastedWhole(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's commands")
	}
	blocks := readmeBlocks(t, "Try it")
	if len(blocks) < 2 {
		t.Fatalf("want the two Try it blocks, found %d", len(blocks))
	}
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	script := strings.Join(blocks[:2], "\necho '--- second block'\n")
	script = strings.ReplaceAll(script, "go run ./cmd/server &", "(sleep 1; exec "+bin+" --addr "+addr+" --metrics-addr 127.0.0.1:0 >/dev/null 2>&1) &")
	script = strings.ReplaceAll(script, "127.0.0.1:8080", "127.0.0.1:"+port)
	if !strings.Contains(script, bin) {
		t.Fatalf("the first block no longer starts the node with go run ./cmd/server &:\n%s", blocks[0])
	}
	out := runScript(t, script)
	first, second, _ := strings.Cut(string(out), "--- second block")
	if !strings.Contains(first, "HTTP/1.1 200") || !strings.Contains(strings.ToLower(first), "mcp-session-id:") {
		t.Errorf("the first block did not initialize a session:\n%s", first)
	}
	if !strings.Contains(second, `"text":"hi"`) {
		t.Errorf("the second block did not call echo:\n%s", second)
	}
}

// runScript runs a README script with bash in a process group of its own
// and returns its stdout. What the script leaves running in the
// background (a node, a provider) is ended with the group once the
// script is done; the script fails the test if it fails or takes over a
// minute.
func runScript(t *testing.T, script string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Background programs may hold stdout open: once the script is done,
	// stop waiting for them.
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.Output()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("the README commands failed (%v):\n%s", err, out)
	}
	return out
}
