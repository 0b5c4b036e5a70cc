package redis

// AppendBatchSource is the whole source of the script that appends a
// batch of events to a stream (appendBatchScript), for the benchmark
// that replays it and variants of it against a Redis of its own
// (bench/cmd/appendcost). The backend runs only the script itself.
func AppendBatchSource() string { return prelude + followPublish + appendBatchBody }
