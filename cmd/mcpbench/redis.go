package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/bench"
)

// redisWatch measures what the window cost in Redis: in one server, or
// in every primary of a Redis Cluster.
type redisWatch struct {
	servers []*serverWatch
	cluster bool
	mon     *bench.Monitor
}

// serverWatch is one server's probe and its figures at the start of the
// window.
type serverWatch struct {
	addr    string
	probe   *bench.RedisProbe
	before  map[string]int64
	bus     int64 // publish messages received over the cluster bus
	clients int
	reads   int64 // total_reads_processed; -1: not counted
}

// startRedisWatch connects to the server of a redis:// or unix:// URL,
// or to every primary of the cluster of a redis-cluster:// URL, and
// takes the figures at the start of the window.
func startRedisWatch(ctx context.Context, rawURL string, monitor bool) (*redisWatch, error) {
	urls, cluster, err := redisServers(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	rw := &redisWatch{cluster: cluster}
	if monitor {
		if cluster {
			return nil, errors.New("--redis-monitor watches one server, not a cluster")
		}
		if rw.mon, err = bench.StartMonitor(ctx, rawURL); err != nil {
			return nil, err
		}
	}
	for _, u := range urls {
		p, err := bench.DialRedis(ctx, u)
		if err != nil {
			rw.close()
			return nil, err
		}
		sw := &serverWatch{addr: serverAddr(u), probe: p}
		rw.servers = append(rw.servers, sw)
		if sw.clients, err = p.ConnectedClients(ctx); err != nil {
			rw.close()
			return nil, err
		}
		// CLUSTER INFO before commandstats, and after it at the end, so
		// that the window counts none of the probe's own commands.
		if cluster {
			if sw.bus, err = busPublishReceived(ctx, p); err != nil {
				rw.close()
				return nil, err
			}
		}
		if sw.before, err = p.CommandStats(ctx); err != nil {
			rw.close()
			return nil, err
		}
		// Last at the start and first at the end: the window holds one
		// read of the probe's own, the final INFO's.
		if sw.reads, err = p.ReadsProcessed(ctx); err != nil {
			sw.reads = -1
		}
	}
	if rw.mon != nil {
		rw.mon.Begin()
	}
	return rw, nil
}

func (rw *redisWatch) finish(ctx context.Context, ops float64, unit string) (*bench.RedisStats, error) {
	defer rw.close()
	st := &bench.RedisStats{Ops: ops, Unit: unit}
	if rw.mon != nil {
		client, script, err := rw.mon.End(300 * time.Millisecond)
		if err != nil {
			return nil, err
		}
		st.RoundTrips, st.RoundTripsPerOp = bench.PerOp(dropProbe(client), ops)
		st.ScriptCommands, _ = bench.PerOp(script, ops)
	}
	total := map[string]int64{}
	var reads int64
	for _, sw := range rw.servers {
		if sw.reads < 0 {
			reads = -1
		} else if r, err := sw.probe.ReadsProcessed(ctx); err != nil {
			reads = -1
		} else if reads >= 0 {
			reads += max(r-sw.reads-1, 0)
		}
	}
	if reads >= 0 && ops > 0 {
		st.ReadsPerOp = float64(reads) / ops
	}
	for _, sw := range rw.servers {
		after, err := sw.probe.CommandStats(ctx)
		if err != nil {
			return nil, err
		}
		d := bench.CommandDelta(sw.before, after)
		for k, v := range d {
			total[k] += v
		}
		clients, err := sw.probe.ConnectedClients(ctx)
		if err != nil {
			return nil, err
		}
		st.ClientsBefore += sw.clients
		st.ClientsAfter += clients
		if !rw.cluster {
			continue
		}
		bus, err := busPublishReceived(ctx, sw.probe)
		if err != nil {
			return nil, err
		}
		sh := bench.ShardStats{Addr: sw.addr}
		if ops > 0 {
			_, sh.CommandsPerOp = bench.PerOp(d, ops)
			sh.PublishPerOp = float64(d["publish"]) / ops
			sh.SPublishPerOp = float64(d["spublish"]) / ops
			sh.BusPublishPerOp = float64(bus-sw.bus) / ops
		}
		st.Shards = append(st.Shards, sh)
	}
	st.Commands, st.CommandsPerOp = bench.PerOp(total, ops)
	return st, nil
}

func (rw *redisWatch) close() {
	if rw.mon != nil {
		rw.mon.Close()
	}
	for _, sw := range rw.servers {
		sw.probe.Close()
	}
}

// redisServers returns the URL of each server to watch: the one of a
// redis:// or unix:// URL, or one redis:// URL per primary of the
// cluster that a redis-cluster://[user:pass@]host:port[,host:port...]
// URL names (as the servers' --redis-url spells it), asked of the first
// host that answers CLUSTER NODES.
func redisServers(ctx context.Context, rawURL string) (urls []string, cluster bool, err error) {
	rest, ok := strings.CutPrefix(rawURL, "redis-cluster://")
	if !ok {
		return []string{rawURL}, false, nil
	}
	authority, tail, _ := strings.Cut(rest, "?")
	if tail != "" || strings.Contains(authority, "/") {
		return nil, true, fmt.Errorf("redis url %q: a cluster URL for --redis has no path or options", rawURL)
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i+1], authority[i+1:]
	}
	var errs []error
	for h := range strings.SplitSeq(hostlist, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), "6379")
		}
		primaries, err := clusterPrimaries(ctx, "redis://"+userinfo+h)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
			continue
		}
		for _, p := range primaries {
			urls = append(urls, "redis://"+userinfo+p)
		}
		return urls, true, nil
	}
	if len(errs) == 0 {
		return nil, true, fmt.Errorf("redis url %q: no hosts", rawURL)
	}
	return nil, true, errors.Join(errs...)
}

// clusterPrimaries asks the server at u for CLUSTER NODES and returns the
// primaries that serve hash slots.
func clusterPrimaries(ctx context.Context, u string) ([]string, error) {
	p, err := bench.DialRedis(ctx, u)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	r, err := p.Do(ctx, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	s, _ := r.(string)
	out := parseClusterPrimaries(s)
	if len(out) == 0 {
		return nil, errors.New("CLUSTER NODES lists no primary with hash slots")
	}
	return out, nil
}

// parseClusterPrimaries reads CLUSTER NODES output, one node a line,
//
//	<id> <ip:port@cport[,hostname]> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...
//
// and returns the host:port of each primary that serves slots and is
// not marked failed.
func parseClusterPrimaries(s string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "master") || slices.ContainsFunc(flags, func(f string) bool {
			return f == "fail" || f == "noaddr" || f == "handshake"
		}) {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		out = append(out, addr)
	}
	return out
}

// busPublishReceived is the publish messages (PUBLISH and SPUBLISH) the
// server received from other nodes over the cluster bus so far.
func busPublishReceived(ctx context.Context, p *bench.RedisProbe) (int64, error) {
	r, err := p.Do(ctx, "CLUSTER", "INFO")
	if err != nil {
		return 0, err
	}
	s, _ := r.(string)
	info := bench.ParseInfo(s)
	var n int64
	for _, k := range []string{"cluster_stats_messages_publish_received", "cluster_stats_messages_publishshard_received"} {
		if v, ok := info[k]; ok {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("CLUSTER INFO %s: %q", k, v)
			}
			n += x
		}
	}
	return n, nil
}

// serverAddr is the host:port of a redis:// URL (the URL itself for
// another form).
func serverAddr(u string) string {
	if pu, err := url.Parse(u); err == nil && pu.Scheme == "redis" {
		return pu.Host
	}
	return u
}
