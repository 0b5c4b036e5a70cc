package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/session"
)

// release is the release of this build, a semantic version: set at
// build time with -ldflags "-X main.release=0.2.1" (a release's tag
// without its "v"), else the module's current release. version (main.go)
// names the build itself. docs/UPGRADING.md says what a release may
// change and which releases may share a cluster.
var release = "0.2.0"

// compatibleWith names the releases whose nodes may run in one cluster
// with this one, during a rolling upgrade or a downgrade (the previous
// minor release and this one).
const compatibleWith = "0.1 and 0.2"

// versionText is what --version prints: the release, the build, and the
// format versions of what the node shares with the other nodes (see
// docs/UPGRADING.md).
func versionText() string {
	goVersion := "unknown Go"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mcpcluster server %s\n", release)
	fmt.Fprintf(&b, "build: %s, %s\n", buildVersion(), goVersion)
	fmt.Fprintf(&b, "node format: writes %d (its instance name ends in %q; with a node of format 1 live it also acknowledges and waits as format 1 does), reads %s\n",
		coordinator.Format, coordinator.FormatSuffix, upTo(coordinator.Format))
	fmt.Fprintf(&b, "session record format: writes %d, reads %s\n", session.Format, upTo(session.Format))
	b.WriteString("bus messages, routed replies, event ids, stream, task and limiter records: the forms of release 0.1 (unknown fields and message kinds are skipped)\n")
	b.WriteString("pub/sub: classic; on Redis Cluster 7.0 or newer, sharded once every live node reads sharded channels\n")
	fmt.Fprintf(&b, "shares a cluster with releases %s (docs/UPGRADING.md)\n", compatibleWith)
	return b.String()
}

// upTo names the formats 1 to n.
func upTo(n int) string {
	if n == 1 {
		return "1"
	}
	return fmt.Sprintf("1 to %d", n)
}
