package redis

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// PubSubMode reports whether be (a backend of this package) reads
// sharded channels and whether it publishes sharded.
func PubSubMode(be *cluster.Backend) (reads, publishes bool) {
	b := (*backend)(be.Bus.(*bus))
	return b.shards != nil, b.pubSharded.Load()
}

// ScriptTrips returns the round trips of script calls be sent and the
// calls they carried.
func ScriptTrips(be *cluster.Backend) (trips, calls uint64) {
	b := (*backend)(be.Bus.(*bus))
	return b.batch.trips.Load(), b.batch.calls.Load()
}

// SendAloneThrough makes be send each script call that goes alone
// through s (a backend with Pipelines < 0 sends every call alone).
func SendAloneThrough(be *cluster.Backend, s goredis.Scripter) {
	b := (*backend)(be.Bus.(*bus))
	b.batch.alone = s
}

// StaleMap is staleMap: whether an error asks for a reload of a
// Cluster's slot map.
var StaleMap = staleMap

// Lingering is how many calls wait in the backend's batcher.
func Lingering(b *cluster.Backend) int {
	q := (*backend)(b.Bus.(*bus)).batch
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
