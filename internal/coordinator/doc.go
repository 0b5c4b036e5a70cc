// Package coordinator is the node: what makes one process a member of
// the cluster. Transports (the HTTP handler of package mcp) are adapters
// over it; it never imports mcp.
//
// A Node holds this process's waiters (Coordinator), its registry of
// running requests and open streams (Registry, behind the small Conn and
// Listener types), the typed bus messages with their one table of kinds,
// codec and handler (bus.go), the membership lease and readiness
// (membership.go), and the cluster flows, numbered as in the table "The
// flows and their files" of docs/ARCHITECTURE.md (which names each
// file's part), a few files each:
//
//	flow 2  a call's stream, recorded before written  poststream.go, produce.go, record.go
//	flow 3  a reply routed to the waiting node        reply.go
//	flow 4  resuming a stream on another node         serve.go, resume.go, sink.go
//	flow 5  a node dies mid-call                      nodeloss.go, membership.go, upkeep.go
//	flow 6  cancellation from any node                cancel.go
//	flow 7  fan-out of notifications                  fanout.go, broadcast.go, getstream.go
//	flow 8  a session ends everywhere                 end.go
//	flow 9  drain on SIGTERM                          drain.go
//	flow 10 durable tasks: run, wake, reap            tasks_api.go, tasks.go, tasks_reap.go, tasks_sweep.go
//	flow 11 subscriptions/listen on any node          registry.go, fanout.go
//
// Around them: the chores of an open stream (upkeep.go), claims that
// live as long as their holder's membership lease (liveness.go), catching up
// after a bus loss (resync.go), and the enabled state of features as
// cluster state (features.go). Flow 1 (initialize) is the session
// store's (package session).
package coordinator
