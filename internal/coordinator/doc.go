// Package coordinator is the node: what makes one process a member of
// the cluster. Transports (the HTTP handler of package mcp) are adapters
// over it; it never imports mcp.
//
// A Node holds this process's waiters (Coordinator), its registry of
// running requests and open streams (Registry, behind the small Conn and
// Listener types), the typed bus messages with their one table of kinds,
// codec and handler (bus.go), the membership lease and readiness
// (membership.go), and the cluster flows of DESIGN §3, one file each:
//
//	flow 2  a call's stream history              record.go
//	flow 3  a reply routed to the waiting node   reply.go
//	flow 4  resuming a stream on another node    resume.go
//	flow 5  a node dies mid-call                 nodeloss.go
//	flow 6  cancellation from any node           cancel.go
//	flow 7  fan-out of notifications             fanout.go, getstream.go
//	flow 8  a session ends everywhere            end.go
//	flow 9  drain on SIGTERM                     drain.go
//	flow 10 durable tasks: run, wake, reap       tasks.go
//
// Around them: the chores of an open stream (upkeep.go), claims that
// live as long as their holder's membership lease (liveness.go), catching up
// after a bus loss (resync.go), and the enabled state of features as
// cluster state (features.go). Flow 1 (initialize) is the session
// store's (package session).
package coordinator
