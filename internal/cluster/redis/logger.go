package redis

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// clientLogger adapts a zerolog.Logger to go-redis's logger interface.
type clientLogger struct{ log zerolog.Logger }

// Printf logs one go-redis message at warn: go-redis logs only what went
// wrong (failed dials, discarded connections, pool trouble).
func (c clientLogger) Printf(_ context.Context, format string, v ...any) {
	c.log.Warn().Msg(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// RouteClientLogs sends go-redis's own messages to log instead of the
// standard library logger (whose plain-text lines would break a JSON
// log). go-redis has one logger per process, so the last call wins.
func RouteClientLogs(log zerolog.Logger) {
	goredis.SetLogger(clientLogger{log: log.With().Str("component", "go-redis").Logger()})
}
