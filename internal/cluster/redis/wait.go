package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// Writes a client is told about (a session's creation, the appends that
// record a stream's events before they are sent, a task's creation and
// each change of its record) wait, when Options.WaitReplicas is set, for
// that many replicas to acknowledge them before they count as done: the
// script and a WAIT go in one pipeline, so WAIT covers the script's
// writes (WAIT waits for the writes of its own connection). A write the
// replicas did not acknowledge within Options.WaitTimeout is an
// ErrUnavailable: the client is told to retry, never that it succeeded,
// so a Sentinel failover to a replica that acknowledged it keeps every
// write a client was told of. Replication stays asynchronous: a write
// the replicas did not get may still be on the old primary, and be lost
// or kept. The setting applies to one server (standalone or Sentinel);
// on Cluster each shard's primary would need its own WAIT, which this
// backend does not send.

// DefaultWaitTimeout is Options.WaitTimeout's default.
const DefaultWaitTimeout = time.Second

// runDurable runs s and, when the writes must reach replicas, waits for
// them.
func (b *backend) runDurable(ctx context.Context, s *goredis.Script, keys []string, args ...any) *goredis.Cmd {
	n := b.opts.WaitReplicas
	if n <= 0 || !b.single {
		return s.Run(ctx, b.client, keys, args...)
	}
	timeout := b.opts.WaitTimeout
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	run := func(sha bool) (*goredis.Cmd, *goredis.Cmd) {
		var cmd, wait *goredis.Cmd
		_, _ = b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			if sha {
				cmd = s.EvalSha(ctx, p, keys, args...)
			} else {
				cmd = s.Eval(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", n, timeout.Milliseconds())
			return nil
		})
		return cmd, wait
	}
	cmd, wait := run(true)
	if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		cmd, wait = run(false)
	}
	if cmd.Err() != nil {
		return cmd
	}
	if err := wait.Err(); err != nil {
		cmd.SetErr(err)
		return cmd
	}
	if got, _ := wait.Int64(); got < int64(n) {
		cmd.SetErr(fmt.Errorf("%w: the write reached %d of %d replicas within %v", cluster.ErrUnavailable, got, n, timeout))
	}
	return cmd
}
