package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// harness lets the process harnesses of the tests (clustertest,
// redistest) run in a program: Fatalf stops everything started so far
// and exits; cleanups run in reverse order at the end of a scenario.
type harness struct {
	testing.TB // never called: only the methods below are used
	mu         sync.Mutex
	cleanups   []func()
	failed     bool
	name       string
	// t, in a go test, fails that test instead of exiting.
	t testing.TB
}

func (h *harness) Helper()      {}
func (h *harness) Name() string { return h.name }
func (h *harness) Failed() bool { return h.failed }
func (h *harness) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...)
}
func (h *harness) Errorf(format string, args ...any) { h.failed = true; h.Logf(format, args...) }
func (h *harness) Fatalf(format string, args ...any) {
	h.failed = true
	h.cleanup()
	if h.t != nil {
		h.t.Fatalf(format, args...)
	}
	h.Logf(format, args...)
	os.Exit(1)
}
func (h *harness) Fatal(args ...any) { h.Fatalf("%s", fmt.Sprint(args...)) }
func (h *harness) Cleanup(f func()) {
	h.mu.Lock()
	h.cleanups = append(h.cleanups, f)
	h.mu.Unlock()
}
func (h *harness) TempDir() string {
	d, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		h.Fatalf("%v", err)
	}
	h.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (h *harness) cleanup() {
	h.mu.Lock()
	fs := h.cleanups
	h.cleanups = nil
	h.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func freePort(h *harness) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is a child process that dies with the harness.
func startProcess(h *harness, name string, logf string, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	f, err := os.Create(logf)
	if err != nil {
		h.Fatalf("%v", err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		h.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	h.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

func waitTCP(h *harness, addr string, what string) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			h.Fatalf("%s not listening on %s after 15s", what, addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	upstreamLine = regexp.MustCompile(`^(\s*)server\s+node[0-9]+:8080(.*)$`)
	listenLine   = regexp.MustCompile(`^(\s*)listen\s+8080;$`)
)

// nginxSite is deploy/nginx/compose.conf with the nodes as upstream
// servers and 127.0.0.1:port as the listen address, the rewrite
// scripts/cluster.sh makes.
func nginxSite(conf string, nodes []string, port int) string {
	var b strings.Builder
	first := true
	for _, line := range strings.Split(conf, "\n") {
		if m := upstreamLine.FindStringSubmatch(line); m != nil {
			if first {
				for _, a := range nodes {
					fmt.Fprintf(&b, "%sserver %s%s\n", m[1], a, m[2])
				}
				first = false
			}
			continue
		}
		if m := listenLine.FindStringSubmatch(line); m != nil {
			fmt.Fprintf(&b, "%slisten 127.0.0.1:%d;\n", m[1], port)
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func findBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// nginx is the balancer: the repository's configuration, run by the
// harness.
type nginx struct {
	cmd  *exec.Cmd
	conf string // deploy/nginx/compose.conf
	site string // its rewrite for this run
	port int
	url  string
}

// route rewrites the upstream servers to addrs and reloads nginx
// gracefully (SIGHUP): what an ingress controller does when a pod leaves
// or joins the Service's endpoints.
func (n *nginx) route(h *harness, addrs []string) {
	if err := os.WriteFile(n.site, []byte(nginxSite(n.conf, addrs, n.port)), 0o644); err != nil {
		h.Fatalf("%v", err)
	}
	_ = n.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond) // new workers take over
}

// stop ends nginx at once (SIGTERM), closing its connections.
func (n *nginx) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
}

// startNginx runs nginx with the repository's configuration in front of
// the nodes.
func startNginx(h *harness, confPath string, nodes []string) *nginx {
	bin := findBin("nginx")
	if bin == "" {
		h.Fatalf("nginx not found (scripts/test.sh and make chaos install it)")
	}
	conf, err := os.ReadFile(confPath)
	if err != nil {
		h.Fatalf("%v", err)
	}
	dir := h.TempDir()
	_ = os.Chmod(dir, 0o755)
	for _, d := range []string{"logs", "tmp"} {
		_ = os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	port := freePort(h)
	site := filepath.Join(dir, "site.conf")
	ng := &nginx{conf: string(conf), site: site, port: port}
	if err := os.WriteFile(site, []byte(nginxSite(string(conf), nodes, port)), 0o644); err != nil {
		h.Fatalf("%v", err)
	}
	main := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[1]s/tmp/client_body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
    include %[2]s;
}
`, dir, site)
	mainPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(mainPath, []byte(main), 0o644); err != nil {
		h.Fatalf("%v", err)
	}
	ng.cmd = startProcess(h, "nginx", filepath.Join(dir, "logs", "stderr.log"), bin, "-p", dir, "-c", mainPath, "-e", filepath.Join(dir, "logs", "error.log"))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitTCP(h, addr, "nginx")
	ng.url = "http://" + addr + "/mcp"
	return ng
}

// ready reports whether a node's /readyz answers 200.
func ready(n *clustertest.Node) bool {
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + n.Addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// toxics is an in-process toxiproxy with one proxy per node in front of
// Redis, so faults can hit every node's link or one node's.
type toxics struct {
	proxies []*toxiproxy.Proxy
}

func startToxics(h *harness, n int, upstream string) *toxics {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	t := &toxics{}
	for i := range n {
		p := toxiproxy.NewProxy(srv, fmt.Sprintf("redis-node%d", i+1), fmt.Sprintf("127.0.0.1:%d", freePort(h)), upstream)
		if err := srv.Collection.Add(p, true); err != nil {
			h.Fatalf("toxiproxy: %v", err)
		}
		t.proxies = append(t.proxies, p)
	}
	h.Cleanup(func() { _ = srv.Collection.Clear() })
	return t
}

// url is node i's Redis URL through its proxy.
func (t *toxics) url(i int) string { return "redis://" + t.proxies[i].Listen + "/0" }

// add puts a toxic on the given proxies (all when none are named).
func (t *toxics) add(h *harness, json string, which ...int) {
	for _, i := range t.pick(which) {
		if _, err := t.proxies[i].Toxics.AddToxicJson(strings.NewReader(json)); err != nil {
			h.Fatalf("toxiproxy: %v", err)
		}
	}
}

func (t *toxics) remove(h *harness, name string, which ...int) {
	for _, i := range t.pick(which) {
		if err := t.proxies[i].Toxics.RemoveToxic(context.Background(), name); err != nil {
			h.Fatalf("toxiproxy: %v", err)
		}
	}
}

func (t *toxics) pick(which []int) []int {
	if len(which) > 0 {
		return which
	}
	all := make([]int, len(t.proxies))
	for i := range all {
		all[i] = i
	}
	return all
}

// sentinelSet is a Redis primary, one replica and three sentinels.
type sentinelSet struct {
	primary, replica *redistest.Server
	sentinels        []string
	master           string
}

// startSentinels starts the set around primary; the replica replicates
// from replicaOf (the primary's address when "", else e.g. a proxy in
// front of it).
func startSentinels(h *harness, primary *redistest.Server, replicaOf string) *sentinelSet {
	s := &sentinelSet{master: "mcp", primary: primary}
	// A replica that replicates from another address than the primary's
	// is "fixed" by the sentinels after failover-timeout: a replica
	// behind a proxy stays behind it for the scenario's length.
	failoverTimeout := 10000
	if replicaOf == "" {
		replicaOf = s.primary.Addr()
	} else {
		failoverTimeout = 600000
	}
	s.replica = redistest.StartWith(h, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", portOf(replicaOf)}})
	bin := findBin("redis-server")
	for i := range 3 {
		dir := h.TempDir()
		port := freePort(h)
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %s 2\nsentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s %d\nsentinel parallel-syncs %s 1\n",
			port, dir, s.master, portOf(s.primary.Addr()), s.master, s.master, failoverTimeout, s.master)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			h.Fatalf("%v", err)
		}
		startProcess(h, "sentinel", filepath.Join(dir, "log"), bin, conf, "--sentinel")
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		waitTCP(h, addr, fmt.Sprintf("sentinel %d", i+1))
		s.sentinels = append(s.sentinels, addr)
	}
	// Wait until the replica is in sync, so a failover has a target.
	rc := goredis.NewClient(&goredis.Options{Addr: s.replica.Addr()})
	defer rc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, _ := rc.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			h.Fatalf("sentinel set: the replica did not sync within 20s: %s", info)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

// failover orders a failover (SENTINEL FAILOVER) and waits until the
// sentinels name another primary and it takes writes.
func (s *sentinelSet) failover(h *harness) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: s.sentinels[0]})
	defer sc.Close()
	before, err := sc.GetMasterAddrByName(ctx, s.master).Result()
	if err != nil {
		h.Logf("sentinel: primary: %v", err)
		return
	}
	if err := sc.Failover(ctx, s.master).Err(); err != nil {
		h.Logf("sentinel: SENTINEL FAILOVER: %v", err)
		return
	}
	for ctx.Err() == nil {
		now, err := sc.GetMasterAddrByName(ctx, s.master).Result()
		if err == nil && strings.Join(now, ":") != strings.Join(before, ":") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.Logf("sentinel: the primary is still %v 30 s after SENTINEL FAILOVER", before)
}

func (s *sentinelSet) url() string {
	return "redis-sentinel://" + strings.Join(s.sentinels, ",") + "/" + s.master
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// nodeFigures reads a node's goroutines and resident memory from its
// /metrics (Go and process collectors).
type nodeFigures struct {
	goroutines int
	rssMiB     float64
	ok         bool
}

func readFigures(n *clustertest.Node) nodeFigures {
	m := readMetrics(n)
	g, ok := m["go_goroutines"]
	return nodeFigures{goroutines: int(g), rssMiB: m["process_resident_memory_bytes"] / (1 << 20), ok: ok}
}

// readMetrics reads a node's /metrics: each sample's value by metric name
// (labels dropped; nil when the node does not answer).
func readMetrics(n *clustertest.Node) map[string]float64 {
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get("http://" + n.Addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			if j := strings.LastIndexByte(line, '}'); j >= 0 {
				rest = strings.TrimSpace(line[j+1:])
			}
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64); err == nil {
			m[name] = v
		}
	}
	return m
}
