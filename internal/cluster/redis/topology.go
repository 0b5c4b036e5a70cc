package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// A Cluster's failover and the slot map.
//
// go-redis's ClusterClient routes each command by its copy of the slot
// map, which it reloads on a MOVED or ASK answer and otherwise only
// every ClusterStateReloadInterval (a minute). A primary that dies
// answers no MOVED: until the next reload every command, pipeline and
// pub/sub connection of its slots is sent to its address again, refused,
// long after a replica took the slots over (the nodes' heartbeats failed
// for half a minute after the Cluster was whole again). So the backend
// asks for a reload (ClusterClient.ReloadState: at once, at most one at a
// time, 200 ms apart while asked again) after every failure that may
// mean the map is out of date: a connection refused, reset or timed out,
// and the answers of a Cluster in the middle of a failover (CLUSTERDOWN,
// TRYAGAIN, MASTERDOWN, LOADING, READONLY). While the replica has not
// taken over yet, a reload finds the same map, and the next failure
// asks again; the first reload after the election routes every command
// to the new primary. The pub/sub connections ask the same way when
// theirs fails (hub.run), before they dial again.

// reloadHook asks a ClusterClient for a reload of its slot map after a
// command or pipeline failed in a way that may mean the map is stale.
type reloadHook struct{ c *goredis.ClusterClient }

func (h reloadHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h reloadHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if staleMap(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		stale := staleMap(err)
		for _, cmd := range cmds {
			stale = stale || staleMap(cmd.Err())
		}
		if stale {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

// followTopology makes the backend reload a Cluster's slot map when a
// failure may mean it is stale (see above); other clients route by no
// map.
func (b *backend) followTopology() {
	if c, ok := b.client.(*goredis.ClusterClient); ok {
		c.AddHook(reloadHook{c})
	}
}

// reloadSlots asks a Cluster client for a reload of its slot map after
// err, when err may mean it is stale.
func (b *backend) reloadSlots(ctx context.Context, err error) {
	if staleMap(err) {
		b.reloadMap()
	}
}

// reloadMap asks a Cluster client for a reload of its slot map.
func (b *backend) reloadMap() {
	if c, ok := b.client.(*goredis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}

// staleMap reports whether err may mean that the slot map is out of
// date: the connection failed (refused, reset, closed, timed out), or a
// Cluster node answered that the cluster is changing hands or that
// another node serves the slot (MOVED and ASK: go-redis reloads on them
// itself, but not for a pub/sub connection).
func staleMap(err error) bool {
	if err == nil || errors.Is(err, goredis.Nil) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var re goredis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "LOADING", "READONLY", "MOVED", "ASK"} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

// masterOf is the address of the primary serving key's slot by the
// client's slot map.
func (b *backend) masterOf(ctx context.Context, key string) (string, error) {
	n, err := b.client.(*goredis.ClusterClient).MasterForKey(ctx, key)
	if err != nil {
		return "", err
	}
	return n.Options().Addr, nil
}
