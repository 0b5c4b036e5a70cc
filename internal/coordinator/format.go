package coordinator

import (
	"strconv"
	"strings"
)

// Format is the version of what a node of this release exchanges with
// the others where an earlier release behaves differently. Each node's
// instance name carries it (its incarnation ends in FormatSuffix), so
// every node learns the format of each member from the membership list
// and from the tokens of the messages it receives; an instance name
// without the suffix is of format 1.
//
//   - Format 1: every node acknowledges every session invalidation
//     (Echo) on TopicAll, and the node that changed the session waits for
//     every live member.
//   - Format 2: a node records itself among the holders of each session
//     it keeps a copy of (cluster.Holders); the node that changes a
//     session waits only for the holders the store returned with the
//     change, and for the live members of format 1, which record nothing.
//     A node acknowledges an invalidation sent by a node of format 2 on
//     that node's own topic (AckTopic), and one sent by a node of format
//     1 on TopicAll, where that node listens.
//
// Nodes of formats 1 and 2 mix in one cluster during a rolling upgrade
// (or a downgrade) with every change acknowledged by every node that may
// hold a copy.
const Format = 2

// FormatSuffix ends the incarnation of a node of this release.
const FormatSuffix = "~2"

// FormatOf returns the format of an instance name: the number after its
// last "~", or 1 when it has none (or it does not parse).
func FormatOf(instance string) int {
	i := strings.LastIndexByte(instance, '~')
	if i < 0 {
		return 1
	}
	f, err := strconv.Atoi(instance[i+1:])
	if err != nil || f < 1 {
		return 1
	}
	return f
}

// AckTopic is the bus topic on which instance receives the
// acknowledgements of its invalidations (format 2 and later).
func AckTopic(instance string) string { return "ack:" + instance }
