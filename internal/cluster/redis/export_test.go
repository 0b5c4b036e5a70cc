package redis

import "github.com/mcpcluster/mcpcluster/internal/cluster"

// PubSubMode reports whether be (a backend of this package) reads
// sharded channels and whether it publishes sharded.
func PubSubMode(be *cluster.Backend) (reads, publishes bool) {
	b := (*backend)(be.Bus.(*bus))
	return b.shards != nil, b.pubSharded.Load()
}
