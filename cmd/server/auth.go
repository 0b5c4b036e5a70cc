package main

import (
	"net"
	"net/http"

	"github.com/rs/zerolog"
)

// protect sets up authorization for the MCP endpoint: with --auth-issuer
// it mounts the Protected Resource Metadata on r and returns the bearer
// middleware; without, it logs that the endpoint is open (a warning when
// it listens beyond loopback) and returns a middleware that does nothing.
func protect(r interface {
	Handle(string, http.Handler)
}, cfg *Config, addr net.Addr, log zerolog.Logger) (func(http.Handler) http.Handler, bool) {
	if !cfg.Auth.Enabled() {
		ev := log.Info()
		if ta, ok := addr.(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			ev = log.Warn()
		}
		ev.Msg("authorization off: anyone who reaches the MCP endpoint can call it (set --auth-issuer and --auth-resource)")
		return func(h http.Handler) http.Handler { return h }, true
	}
	res, verifier, err := cfg.Auth.New(nil)
	if err != nil {
		log.Error().Err(err).Msg("authorization set-up failed")
		return nil, false
	}
	for _, p := range res.MetadataPaths() {
		r.Handle(p, res.MetadataHandler())
	}
	log.Info().Str("auth", cfg.Auth.String()).Str("resource_metadata", res.MetadataURL()).Msg("authorization on")
	return res.Middleware(verifier, log.With().Str("component", "auth").Logger()), true
}
