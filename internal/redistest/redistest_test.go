package redistest_test

import (
	"bufio"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/redistest"
)

// roundTrip sends one inline command and returns the first reply line.
func roundTrip(t *testing.T, network, addr, cmd string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestStartRestartKill(t *testing.T) {
	for _, unix := range []bool{false, true} {
		s := redistest.StartWith(t, redistest.Options{Unix: unix})
		if unix && !strings.HasPrefix(s.URL(), "unix:///") {
			t.Fatalf("URL: got %q", s.URL())
		}
		if !unix && (!strings.HasPrefix(s.URL(), "redis://127.0.0.1:") || strings.HasSuffix(s.Addr(), ":6379")) {
			t.Fatalf("URL: got %q", s.URL())
		}
		if got, err := roundTrip(t, s.Network(), s.Addr(), "SET k v"); err != nil || got != "+OK" {
			t.Fatalf("SET: got %q, %v", got, err)
		}
		if got, _ := roundTrip(t, s.Network(), s.Addr(), "CONFIG GET save"); got != "*2" {
			t.Fatalf("CONFIG GET save: got %q", got)
		}
		s.Kill()
		if s.Running() {
			t.Fatalf("Running after Kill")
		}
		if _, err := roundTrip(t, s.Network(), s.Addr(), "PING"); err == nil {
			t.Fatalf("PING after Kill succeeded")
		}
		s.Restart()
		if got, err := roundTrip(t, s.Network(), s.Addr(), "GET k"); err != nil || got != "$-1" {
			t.Fatalf("GET after Restart: got %q, %v, want an empty server", got, err)
		}
		s.Stop()
		s.Restart()
		if got, err := roundTrip(t, s.Network(), s.Addr(), "PING"); err != nil || got != "+PONG" {
			t.Fatalf("PING after Stop and Restart: got %q, %v", got, err)
		}
	}
}

func TestCluster(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Cluster: true})
	if got, err := s.Do("SET {a}x 1"); err != nil || got != "+OK" {
		t.Fatalf("SET on the one-node cluster: got %q, %v", got, err)
	}
	if got, _ := s.Do("MSET {a}x 1 {b}y 2"); !strings.HasPrefix(got, "-CROSSSLOT") {
		t.Fatalf("cross-slot MSET: got %q, want a CROSSSLOT error", got)
	}
	s.Restart()
	if got, err := s.Do("SET {a}x 1"); err != nil || got != "+OK" {
		t.Fatalf("SET after Restart: got %q, %v", got, err)
	}
}

func TestPersistKeepsAcknowledgedWritesAcrossKill(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Persist: true})
	if got, _ := s.Do("CONFIG GET appendfsync"); got != "*2" {
		t.Fatalf("CONFIG GET appendfsync: got %q", got)
	}
	if got, err := s.Do("SET k v"); err != nil || got != "+OK" {
		t.Fatalf("SET: got %q, %v", got, err)
	}
	s.Restart() // SIGKILL, then start again on the same directory
	if got, err := s.Do("GET k"); err != nil || got != "$1" {
		t.Fatalf("GET after Restart: got %q, %v, want the value written before the kill", got, err)
	}
	s.Kill()
	s.Restart()
	if got, err := s.Do("EXISTS k"); err != nil || got != ":1" {
		t.Fatalf("EXISTS after Kill and Restart: got %q, %v", got, err)
	}
}

func TestSentinel(t *testing.T) {
	m := redistest.StartWith(t, redistest.Options{Args: []string{"--requirepass", "pw"}})
	if got, _ := m.Do("GET k"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("GET without AUTH on a server with a password: got %q", got)
	}
	s := redistest.StartSentinel(t, redistest.Sentinel{Master: m, Config: []string{"sentinel auth-pass mymaster pw"}})
	if got, err := s.Do("SENTINEL get-master-addr-by-name mymaster"); err != nil || got != "*2" {
		t.Fatalf("SENTINEL get-master-addr-by-name: got %q, %v", got, err)
	}
}

// A TLS server speaks only TLS, with a certificate of its authority for
// 127.0.0.1, and refuses a client without a certificate of it.
func TestTLS(t *testing.T) {
	ca := redistest.NewCA(t, "test CA")
	s := redistest.StartWith(t, redistest.Options{TLS: &redistest.TLS{CA: ca}})
	if !strings.HasPrefix(s.URL(), "rediss://127.0.0.1:") {
		t.Fatalf("URL: got %q", s.URL())
	}
	if got, err := s.Do("PING"); err != nil || got != "+PONG" {
		t.Fatalf("PING over TLS: got %q, %v", got, err)
	}
	if got, err := roundTrip(t, "tcp", s.Addr(), "PING"); err == nil && got == "+PONG" {
		t.Fatal("the server answered in the clear")
	}
	cfg := ca.ClientConfig(t)
	cfg.Certificates, cfg.ServerName = nil, "127.0.0.1"
	c, err := tls.Dial("tcp", s.Addr(), cfg)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Write([]byte("PING\r\n"))
		if err == nil {
			_, err = c.Read(make([]byte, 16))
		}
		c.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate got an answer")
	}
}

// A Cluster with a replica per primary: kill -9 of a primary promotes its
// replica, and CLUSTER FAILOVER on the old primary (back as a replica)
// hands the slots back.
func TestClusterReplicasFailover(t *testing.T) {
	all := redistest.StartClusterWith(t, 3, redistest.Options{Replicas: 1})
	if len(all) != 6 {
		t.Fatalf("%d servers, want 6", len(all))
	}
	for i, s := range all {
		if want := i < 3; s.Primary() != want {
			t.Fatalf("server %d (%s): primary %v, want %v", i, s.Addr(), s.Primary(), want)
		}
	}
	p := all[1]
	if r := p.Replicas(all); len(r) != 1 || r[0] != all[4] {
		t.Fatalf("replicas of %s: %v, want %s", p.Addr(), r, all[4].Addr())
	}
	killed := time.Now()
	promoted, ok, err := redistest.KillPrimary(all, p, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s took over %v after the kill", promoted.Addr(), ok.Sub(killed).Round(time.Millisecond))
	if promoted != all[4] {
		t.Fatalf("promoted %s, want %s", promoted.Addr(), all[4].Addr())
	}
	p.Restart() // back as a replica of the new primary
	if err := redistest.WaitClusterOK(all, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(promoted.Replicas(all)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come back as a replica of %s", p.Addr(), promoted.Addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := p.Failover(all, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Primary() || promoted.Primary() {
		t.Fatalf("after CLUSTER FAILOVER: %s primary %v, %s primary %v", p.Addr(), p.Primary(), promoted.Addr(), promoted.Primary())
	}
}
