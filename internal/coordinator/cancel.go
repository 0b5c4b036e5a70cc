package coordinator

import "context"

// Flow 6 (docs/ARCHITECTURE.md, "The flows and their files"): notifications/cancelled lands on any node and
// reaches the handler context of the request wherever it runs.

// maxCancelKey bounds the request id kept with a recorded cancellation.
const maxCancelKey = 256

// cancelKey names the record of a cancelled request of a session. It is
// not a claim of the session (those are indexed under it until it ends):
// it only expires, after HistoryTTL, so a long session's cancellations
// leave nothing behind.
func cancelKey(sid, id string) string { return "cancelled:" + sid + ":" + id }

// CancelRequest cancels request id of session sid wherever it runs: the
// broadcast reaches the nodes whose bus is up, and the record the others
// when their bus comes back (resync).
func (n *Node) CancelRequest(ctx context.Context, sid, id string) {
	if len(id) <= maxCancelKey {
		if _, err := n.be.Claims.Claim(ctx, cancelKey(sid, id), n.instance, n.history); err != nil {
			n.log.Warn().Err(err).Msg("cancellation not recorded")
		}
	}
	if err := n.Publish(ctx, CancelRequest{Session: sid, ID: id}); err != nil {
		n.log.Warn().Err(err).Msg("cancellation not broadcast")
	}
}
