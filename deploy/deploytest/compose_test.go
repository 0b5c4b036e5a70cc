package deploytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// testStateKey is the MCP_STATE_KEY the compose file is interpolated with.
const testStateKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// minStreamTimeout is the shortest proxy read timeout accepted in front of
// SSE streams (nginx's default of 60s would cut idle streams whenever a
// keep-alive is late).
const minStreamTimeout = 10 * time.Minute

// repoRoot is the repository holding this module (deploy/deploytest).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s: %v", root, err)
	}
	return root
}

// loadCompose loads dir/docker-compose.yml the way `docker compose` does:
// interpolation from env, schema validation, normalization, consistency
// checks, paths resolved against dir.
func loadCompose(dir string, env map[string]string) (*types.Project, error) {
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "docker-compose.yml")}},
		Environment: types.Mapping(env),
	}
	return loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("mcpcluster", true)
	})
}

// checkCompose loads the compose file in dir and returns every way it
// falls short of the deployment rules:
//   - every service has an enabled health check;
//   - at least three node services, or a node service with two or more
//     replicas (a node is a service with MCP_REDIS_URL in its environment),
//     all sharing one Redis URL and the interpolated state key;
//   - the Redis service publishes no port;
//   - nginx publishes a port, bind-mounts its config, and that config turns
//     proxy buffering off, has a read timeout of at least minStreamTimeout
//     and lists every node service as an upstream server.
func checkCompose(dir string) error {
	p, err := loadCompose(dir, map[string]string{"MCP_STATE_KEY": testStateKey})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	names := slices.Sorted(func(yield func(string) bool) {
		for name := range p.Services {
			if !yield(name) {
				return
			}
		}
	})
	var nodes []string
	var redis, nginx []string
	maxScale := 0
	redisURLs := map[string]bool{}
	for _, name := range names {
		s := p.Services[name]
		hc := s.HealthCheck
		switch {
		case hc == nil:
			bad("service %s has no health check", name)
		case hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE":
			bad("service %s has its health check disabled", name)
		}
		image := s.Image
		if i := strings.LastIndex(image, "/"); i >= 0 {
			image = image[i+1:]
		}
		switch {
		case s.Environment["MCP_REDIS_URL"] != nil:
			nodes = append(nodes, name)
			maxScale = max(maxScale, s.GetScale())
			redisURLs[*s.Environment["MCP_REDIS_URL"]] = true
			if k := s.Environment["MCP_STATE_KEY"]; k == nil || *k != testStateKey {
				bad("node service %s does not take MCP_STATE_KEY from the environment", name)
			}
		case strings.HasPrefix(image, "redis:") || image == "redis":
			redis = append(redis, name)
		case strings.HasPrefix(image, "nginx:") || image == "nginx":
			nginx = append(nginx, name)
		}
	}
	if len(nodes) < 3 && maxScale < 2 {
		bad("only %d node service(s) %v with at most %d replica(s): a cluster needs at least 3 node services or replicas >= 2", len(nodes), nodes, maxScale)
	}
	if len(redisURLs) > 1 {
		bad("node services use different Redis URLs: %v", slices.Sorted(func(yield func(string) bool) {
			for u := range redisURLs {
				if !yield(u) {
					return
				}
			}
		}))
	}
	if len(redis) != 1 {
		bad("want exactly one Redis service, found %v", redis)
	}
	for _, name := range redis {
		if ports := p.Services[name].Ports; len(ports) > 0 {
			bad("Redis service %s publishes ports %v: Redis must stay inside the compose network", name, publishedPorts(ports))
		}
	}
	if len(nginx) != 1 {
		bad("want exactly one nginx service, found %v", nginx)
	}
	for _, name := range nginx {
		s := p.Services[name]
		if len(s.Ports) == 0 {
			bad("nginx service %s publishes no port", name)
		}
		var confs []string
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && strings.HasSuffix(v.Source, ".conf") {
				confs = append(confs, v.Source)
			}
		}
		if len(confs) == 0 {
			bad("nginx service %s bind-mounts no .conf file", name)
		}
		for _, conf := range confs {
			if err := checkNginxConf(conf, nodes); err != nil {
				bad("nginx service %s: %w", name, err)
			}
		}
		// The nodes believe nginx's X-Forwarded-For: they trust its
		// address, and only it.
		var addrs []string
		for _, n := range s.Networks {
			if n != nil && n.Ipv4Address != "" {
				addrs = append(addrs, n.Ipv4Address)
			}
		}
		if len(addrs) == 0 {
			bad("nginx service %s has no fixed address for the nodes to trust", name)
		}
		for _, node := range nodes {
			tp := p.Services[node].Environment["MCP_TRUSTED_PROXIES"]
			if tp == nil || !slices.Equal(strings.Split(*tp, ","), addrs) {
				bad("node service %s: MCP_TRUSTED_PROXIES %v, want nginx's address %v", node, tp, addrs)
			}
		}
	}
	return errors.Join(errs...)
}

func publishedPorts(ports []types.ServicePortConfig) []string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s:%s->%d", p.HostIP, p.Published, p.Target))
	}
	return out
}

// nginxDirective matches one simple directive ("name args;") in a config
// from which comments were removed.
var nginxDirective = regexp.MustCompile(`(?m)(?:^|[{};])\s*([a-z_]+)\s+([^;{}]*);`)

// checkNginxConf checks an nginx config for SSE: proxy_buffering off (and
// never on), proxy_read_timeout at least minStreamTimeout wherever set and
// set at least once, an upstream server line for every node in nodes
// (by compose service name), and no HTTP status in proxy_next_upstream (a
// status there also counts as a failed node for max_fails).
func checkNginxConf(path string, nodes []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := regexp.MustCompile(`(?m)#.*$`).ReplaceAllString(string(b), "")
	var errs []error
	buffering, timeouts, forwarded := 0, 0, 0
	servers := map[string]bool{}
	for _, m := range nginxDirective.FindAllStringSubmatch(text, -1) {
		name, args := m[1], strings.Fields(m[2])
		switch name {
		case "proxy_buffering":
			if len(args) == 1 && args[0] == "off" {
				buffering++
			} else {
				errs = append(errs, fmt.Errorf("%s: proxy_buffering %s (SSE needs off)", filepath.Base(path), strings.Join(args, " ")))
			}
		case "proxy_read_timeout":
			timeouts++
			if len(args) != 1 {
				errs = append(errs, fmt.Errorf("%s: malformed proxy_read_timeout", filepath.Base(path)))
				break
			}
			d, err := nginxDuration(args[0])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: proxy_read_timeout: %w", filepath.Base(path), err))
			} else if d < minStreamTimeout {
				errs = append(errs, fmt.Errorf("%s: proxy_read_timeout %s is shorter than %s: idle SSE streams would be cut", filepath.Base(path), args[0], minStreamTimeout))
			}
		case "proxy_next_upstream":
			for _, a := range args {
				if strings.HasPrefix(a, "http_5") || a == "http_429" {
					errs = append(errs, fmt.Errorf("%s: proxy_next_upstream %s: the nodes' JSON-RPC 503s (Redis unreachable) would count as failures and mark every node down", filepath.Base(path), a))
				}
			}
		case "proxy_set_header":
			if len(args) == 2 && strings.EqualFold(args[0], "X-Forwarded-For") && args[1] == "$proxy_add_x_forwarded_for" {
				forwarded++
			}
		case "server":
			if len(args) > 0 {
				host, _, _ := strings.Cut(args[0], ":")
				servers[host] = true
			}
		}
	}
	if buffering == 0 {
		errs = append(errs, fmt.Errorf("%s: no proxy_buffering off (SSE events would be held in nginx buffers)", filepath.Base(path)))
	}
	if timeouts == 0 {
		errs = append(errs, fmt.Errorf("%s: no proxy_read_timeout (the default 60s cuts idle SSE streams)", filepath.Base(path)))
	}
	if forwarded == 0 {
		errs = append(errs, fmt.Errorf("%s: no proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for (every anonymous client would be one caller, the proxy)", filepath.Base(path)))
	}
	for _, n := range nodes {
		if !servers[n] {
			errs = append(errs, fmt.Errorf("%s: node service %s is not an upstream server", filepath.Base(path), n))
		}
	}
	return errors.Join(errs...)
}

// nginxDuration parses an nginx time value: a number with an optional unit
// (ms, s, m, h, d, w, M, y) or several such parts ("1h 30m" is written
// "1h30m" in nginx too). A bare number is seconds.
func nginxDuration(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"ms": time.Millisecond, "": time.Second, "s": time.Second, "m": time.Minute,
		"h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
		"M": 30 * 24 * time.Hour, "y": 365 * 24 * time.Hour,
	}
	parts := regexp.MustCompile(`(\d+)(ms|s|m|h|d|w|M|y)?`).FindAllStringSubmatch(s, -1)
	if len(parts) == 0 || strings.Join(func() []string {
		var all []string
		for _, p := range parts {
			all = append(all, p[0])
		}
		return all
	}(), "") != s {
		return 0, fmt.Errorf("bad nginx time %q", s)
	}
	var d time.Duration
	for _, p := range parts {
		n, err := strconv.Atoi(p[1])
		if err != nil {
			return 0, fmt.Errorf("bad nginx time %q", s)
		}
		d += time.Duration(n) * units[p[2]]
	}
	return d, nil
}

func TestNginxDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"60": time.Minute, "3600s": time.Hour, "1h": time.Hour, "90m": 90 * time.Minute,
		"1h30m": 90 * time.Minute, "500ms": 500 * time.Millisecond, "1d": 24 * time.Hour,
	} {
		if got, err := nginxDuration(in); err != nil || got != want {
			t.Errorf("nginxDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1x", "h", "1 h", "-1s"} {
		if _, err := nginxDuration(in); err == nil {
			t.Errorf("nginxDuration(%q) succeeded", in)
		}
	}
}

// TestComposeFile checks the repository's docker-compose.yml and the nginx
// config it mounts.
func TestComposeFile(t *testing.T) {
	root := repoRoot(t)
	if err := checkCompose(root); err != nil {
		t.Fatalf("docker-compose.yml:\n%v", err)
	}
	// MCP_STATE_KEY is required: interpolation fails without it.
	if _, err := loadCompose(root, nil); err == nil || !strings.Contains(err.Error(), "MCP_STATE_KEY") {
		t.Errorf("loading without MCP_STATE_KEY: got %v, want an error naming MCP_STATE_KEY", err)
	}
}

// copyCompose copies docker-compose.yml and deploy/nginx/compose.conf into
// a temporary directory laid out like the repository and returns it.
func copyCompose(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	for _, rel := range []string{"docker-compose.yml", "deploy/nginx/compose.conf"} {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editComposeYAML decodes dir/docker-compose.yml (anchors and merge keys
// resolved), lets edit change it, and writes it back.
func editComposeYAML(t *testing.T, dir string, edit func(doc map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "docker-compose.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editFile replaces old by new in dir/rel, which must contain old.
func editFile(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	path := filepath.Join(dir, rel)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q: the broken-copy case is stale", rel, old)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), old, new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func service(t *testing.T, doc map[string]any, name string) map[string]any {
	t.Helper()
	s, ok := doc["services"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("docker-compose.yml has no service %s: the broken-copy case is stale", name)
	}
	return s
}

// TestComposeBrokenCopies checks that checkCompose rejects broken copies
// of the compose set-up, each for the expected reason.
func TestComposeBrokenCopies(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, dir string)
		want   string
	}{
		{"node without health check", func(t *testing.T, dir string) {
			editComposeYAML(t, dir, func(doc map[string]any) { delete(service(t, doc, "node2"), "healthcheck") })
		}, "service node2 has no health check"},
		{"redis without health check", func(t *testing.T, dir string) {
			editComposeYAML(t, dir, func(doc map[string]any) {
				delete(service(t, doc, "redis"), "healthcheck")
				// node depends_on conditions would otherwise reject it first
				for _, n := range []string{"node1", "node2", "node3"} {
					service(t, doc, n)["depends_on"] = []any{"redis"}
				}
			})
		}, "service redis has no health check"},
		{"health check disabled", func(t *testing.T, dir string) {
			editComposeYAML(t, dir, func(doc map[string]any) {
				service(t, doc, "nginx")["healthcheck"] = map[string]any{"disable": true}
			})
		}, "service nginx has its health check disabled"},
		{"redis published", func(t *testing.T, dir string) {
			editComposeYAML(t, dir, func(doc map[string]any) { service(t, doc, "redis")["ports"] = []any{"6379:6379"} })
		}, "Redis service redis publishes ports"},
		{"node dropped", func(t *testing.T, dir string) {
			editComposeYAML(t, dir, func(doc map[string]any) {
				delete(doc["services"].(map[string]any), "node3")
				delete(service(t, doc, "nginx")["depends_on"].(map[string]any), "node3")
			})
		}, "only 2 node service(s)"},
		{"invalid YAML", func(t *testing.T, dir string) {
			editFile(t, dir, "docker-compose.yml", "services:\n", "services:\n  redis: [unclosed\n")
		}, "load:"},
		{"schema violation", func(t *testing.T, dir string) {
			editComposeYAML(t, dir, func(doc map[string]any) { service(t, doc, "node1")["helthcheck"] = map[string]any{"test": "true"} })
		}, "helthcheck"},
		{"nginx buffering", func(t *testing.T, dir string) {
			editFile(t, dir, "deploy/nginx/compose.conf", "proxy_buffering off;", "proxy_buffering on;")
		}, "proxy_buffering on (SSE needs off)"},
		{"nginx short read timeout", func(t *testing.T, dir string) {
			editFile(t, dir, "deploy/nginx/compose.conf", "proxy_read_timeout 1h;", "proxy_read_timeout 60s;")
		}, "proxy_read_timeout 60s is shorter than"},
		{"nginx counts 503 as a failure", func(t *testing.T, dir string) {
			editFile(t, dir, "deploy/nginx/compose.conf", "proxy_next_upstream error timeout;", "proxy_next_upstream error timeout http_502 http_503;")
		}, "proxy_next_upstream http_502"},
		{"nginx missing upstream", func(t *testing.T, dir string) {
			editFile(t, dir, "deploy/nginx/compose.conf", "server node3:8080", "server node9:8080")
		}, "node service node3 is not an upstream server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCompose(t)
			if err := checkCompose(dir); err != nil {
				t.Fatalf("the unbroken copy fails: %v", err)
			}
			tc.mutate(t, dir)
			err := checkCompose(dir)
			if err == nil {
				t.Fatalf("checkCompose accepted the broken copy")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkCompose failed for another reason:\n%v\nwant an error containing %q", err, tc.want)
			}
			t.Logf("rejected as expected: %v", err)
		})
	}
}
