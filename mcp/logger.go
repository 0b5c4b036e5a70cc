package mcp

import (
	"log/slog"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/telemetry"
)

// logger is the logger of the options: z when set, else l, else none.
func logger(l *slog.Logger, z *zerolog.Logger) zerolog.Logger {
	switch {
	case z != nil:
		return *z
	case l != nil:
		return telemetry.FromSlog(l.Handler())
	}
	return zerolog.Nop()
}
