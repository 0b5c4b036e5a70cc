package redis

import "time"

// Writes a client is told about (a session's creation, the appends that
// record a stream's events before they are sent, a task's creation and
// each change of its record) wait, when Options.WaitReplicas is set, for
// that many replicas to acknowledge them before they count as done: the
// script and a WAIT go in one pipeline (with the other scripts of that
// round trip, batch.go), so WAIT covers the scripts' writes (WAIT waits
// for the writes of its own connection). A write the
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

// waitTimeout is how long a WAIT waits for the replicas.
func (b *backend) waitTimeout() time.Duration {
	if b.opts.WaitTimeout <= 0 {
		return DefaultWaitTimeout
	}
	return b.opts.WaitTimeout
}
