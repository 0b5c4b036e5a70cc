package redistest

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// A Cluster of StartClusterWith with Options.Replicas: its failovers.
//
// Kill (kill -9) of a primary is a crash: once the others have not heard
// from it for cluster-node-timeout they mark it failed and one of its
// replicas is elected in its place (KillPrimary waits for that).
// Failover runs CLUSTER FAILOVER on a replica: the graceful hand-over,
// in which the primary stops taking writes, the replica catches up and
// takes its slots, and the old primary becomes its replica.

// replicate makes each of the replicas (perShard per primary, in the
// order of StartClusterWith) a replica of its primary and waits until
// each one is in sync with it and every node sees cluster_state:ok.
func replicate(primaries, replicas []*Server, perShard int, deadline time.Time) error {
	for i, r := range replicas {
		p := primaries[i/perShard]
		id, err := p.Bulk("CLUSTER MYID")
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", p.Addr(), err)
		}
		// The replica learns of the primary's id through the cluster
		// bus a little after the MEET: retry until it knows it.
		for {
			line, err := r.Do("CLUSTER REPLICATE " + id)
			if err == nil && line == "+OK" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CLUSTER REPLICATE on %s: %q, %v", r.Addr(), line, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, r := range replicas {
		if err := r.waitInfo(deadline, "replication", "master_link_status:up"); err != nil {
			return err
		}
	}
	return WaitClusterOK(append(primaries, replicas...), time.Until(deadline))
}

// Bulk sends one inline command on a new connection and returns its
// reply: the text of a bulk string reply (INFO, CLUSTER NODES, CLUSTER
// MYID), or the first line of any other (an error as "-ERR ...").
func (s *Server) Bulk(cmd string) (string, error) {
	c, r, err := s.send(cmd)
	if err != nil {
		return "", err
	}
	defer c.Close()
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	n, ok := strings.CutPrefix(line, "$")
	if !ok {
		return line, nil
	}
	size, err := strconv.Atoi(n)
	if err != nil || size < 0 {
		return "", fmt.Errorf("%s answered %q", cmd, line)
	}
	buf := make([]byte, size+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:size]), nil
}

// waitInfo waits until INFO section contains every one of want.
func (s *Server) waitInfo(deadline time.Time, section string, want ...string) error {
	for {
		info, err := s.Bulk("INFO " + section)
		if err == nil && containsAll(info, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never reported %v in INFO %s (%v): %s", s.Addr(), want, section, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Primary reports whether the server runs and is a primary now.
func (s *Server) Primary() bool {
	info, err := s.Bulk("INFO replication")
	return err == nil && strings.Contains(info, "role:master")
}

// Keys is how many keys the server holds (DBSIZE; -1 when it does not
// answer).
func (s *Server) Keys() int {
	line, err := s.Do("DBSIZE")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimPrefix(line, ":"))
	if err != nil {
		return -1
	}
	return n
}

// Replicas returns the servers of all that replicate from s now.
func (s *Server) Replicas(all []*Server) []*Server {
	var out []*Server
	want := "master_port:" + strconv.Itoa(s.port) + "\r\n"
	for _, r := range all {
		if r == s || !r.Running() {
			continue
		}
		if info, err := r.Bulk("INFO replication"); err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, want) {
			out = append(out, r)
		}
	}
	return out
}

// MostKeys returns the running primary of all that holds the most keys.
func MostKeys(all []*Server) *Server {
	var best *Server
	bestN := -1
	for _, s := range all {
		if !s.Running() || !s.Primary() {
			continue
		}
		if n := s.Keys(); n > bestN {
			best, bestN = s, n
		}
	}
	return best
}

// WaitClusterOK waits up to timeout until every running server of all
// reports cluster_state:ok.
func WaitClusterOK(all []*Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range all {
		if !s.Running() {
			continue
		}
		if err := s.waitClusterInfo(deadline, "cluster_state:ok"); err != nil {
			return err
		}
	}
	return nil
}

// KillPrimary kills the primary p (kill -9) and waits up to timeout
// until one of its replicas has taken over and every running server of
// all reports cluster_state:ok again. It returns the new primary and the
// moment the cluster was whole again.
func KillPrimary(all []*Server, p *Server, timeout time.Duration) (*Server, time.Time, error) {
	deadline := time.Now().Add(timeout)
	replicas := p.Replicas(all)
	if len(replicas) == 0 {
		return nil, time.Time{}, fmt.Errorf("%s has no replica to take over", p.Addr())
	}
	p.Kill()
	for {
		for _, r := range replicas {
			if r.Primary() {
				if err := WaitClusterOK(all, time.Until(deadline)); err != nil {
					return r, time.Time{}, err
				}
				return r, time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return nil, time.Time{}, fmt.Errorf("no replica of %s took over within %v", p.Addr(), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Failover runs CLUSTER FAILOVER on the replica s (once it is in sync)
// and waits up to timeout until it is a primary, its old primary a
// replica, and every running server of all reports cluster_state:ok. It returns the moment the cluster was whole again.
func (s *Server) Failover(all []*Server, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	if err := s.waitInfo(deadline, "replication", "master_link_status:up"); err != nil {
		return time.Time{}, err
	}
	info, err := s.Bulk("INFO replication") // names the primary it replaces
	if err != nil {
		return time.Time{}, err
	}
	if line, err := s.Do("CLUSTER FAILOVER"); err != nil || line != "+OK" {
		return time.Time{}, fmt.Errorf("CLUSTER FAILOVER on %s: %q, %v", s.Addr(), line, err)
	}
	if err := s.waitInfo(deadline, "replication", "role:master"); err != nil {
		return time.Time{}, err
	}
	for _, p := range all {
		if p.Running() && strings.Contains(info, "master_port:"+strconv.Itoa(p.port)+"\r\n") {
			if err := p.waitInfo(deadline, "replication", "role:slave"); err != nil {
				return time.Time{}, err
			}
		}
	}
	if err := WaitClusterOK(all, time.Until(deadline)); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}
