package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Log conventions shared by every package: a duration is logged as a
// number of milliseconds in a field whose name ends in "_ms"; a session
// id is never logged, only its SessionTag.

// Ms is d in milliseconds, to the microsecond: the one unit of durations
// in logs.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// SessionTag is what logs show of a session id: a short hash that tells
// sessions apart and matches across nodes, but cannot be used to act on
// the session (the id is a bearer credential).
func SessionTag(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:6])
}
