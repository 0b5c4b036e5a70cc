package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/backendwrap"
	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/telemetry"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// The node's Redis: the URL, the key prefix, and the --redis-* settings
// of the connection (TLS and the password from files, the pool and its
// timeouts), which go-redis's own options carry.

// prefixPattern is what --redis-prefix accepts: no ':' (a prefix "a"
// would share keys with a prefix "a:sessions"), no braces (hash tags).
var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// connSettings names the setting of each field of clusterredis.ConnOptions.
var connSettings = map[string]string{
	"Username": "redis-username", "PasswordFile": "redis-password-file", "CAFile": "redis-ca-file",
	"CertFile": "redis-cert-file", "KeyFile": "redis-key-file", "TLSServerName": "redis-tls-server-name",
	"PoolSize": "redis-pool-size", "MinIdleConns": "redis-min-idle-conns",
	"DialTimeout": "redis-dial-timeout", "ReadTimeout": "redis-read-timeout", "WriteTimeout": "redis-write-timeout",
}

// redisConn is the connection options the settings give; the caller adds
// the logger.
func (c *Config) redisConn() clusterredis.ConnOptions {
	return clusterredis.ConnOptions{
		Username: c.RedisUsername, PasswordFile: c.RedisPassFile,
		CAFile: c.RedisCAFile, CertFile: c.RedisCertFile, KeyFile: c.RedisKeyFile, TLSServerName: c.RedisTLSName,
		PoolSize: c.RedisPoolSize, MinIdleConns: c.RedisMinIdle,
		DialTimeout: c.RedisDialTO, ReadTimeout: c.RedisReadTO, WriteTimeout: c.RedisWriteTO,
	}
}

// validateRedis checks the Redis settings: the prefix and the numbers
// always; the connection settings against the URL, reading their files,
// when the node has one, and that none is set when it has none.
func (c *Config) validateRedis(bad func(name, format string, args ...any)) {
	if !prefixPattern.MatchString(c.RedisPrefix) {
		bad("redis-prefix", "must be 1 to 64 letters, digits, '.', '_' or '-' (no ':', which would let it overlap another deployment's keys, and no braces, which are hash tags), not %q", c.RedisPrefix)
	}
	for name, n := range map[string]int{"redis-pool-size": c.RedisPoolSize, "redis-min-idle-conns": c.RedisMinIdle, "redis-wait-replicas": c.RedisWait, "redis-pipelines": c.RedisPipelines} {
		if n < 0 {
			bad(name, "must not be negative, not %d", n)
		}
	}
	if c.RedisPipeCalls <= 0 {
		bad("redis-pipeline-calls", "must be positive, not %d", c.RedisPipeCalls)
	}
	if c.RedisLinger < 0 {
		bad("redis-append-linger", "must not be negative, not %s", c.RedisLinger)
	}
	for name, d := range map[string]time.Duration{"redis-dial-timeout": c.RedisDialTO, "redis-read-timeout": c.RedisReadTO, "redis-write-timeout": c.RedisWriteTO, "redis-wait-timeout": c.RedisWaitTO, "redis-eviction-check": c.RedisEvictCheck} {
		if d <= 0 {
			bad(name, "must be positive, not %s", d)
		}
	}
	if c.RedisURL == "" || c.Stdio {
		for name, v := range map[string]string{"redis-username": c.RedisUsername, "redis-password-file": c.RedisPassFile,
			"redis-ca-file": c.RedisCAFile, "redis-cert-file": c.RedisCertFile, "redis-key-file": c.RedisKeyFile, "redis-tls-server-name": c.RedisTLSName} {
			if v != "" {
				bad(name, "needs --redis-url (the node runs on the in-memory backend without it)")
			}
		}
		return
	}
	o, err := clusterredis.ParseURL(c.RedisURL)
	if err != nil {
		return // reported when the node connects, with the URL redacted
	}
	var ce *clusterredis.ConnError
	if err := c.redisConn().Apply(o); errors.As(err, &ce) && connSettings[ce.Field] != "" {
		bad(connSettings[ce.Field], "%v", ce.Err)
	} else if err != nil {
		bad("redis-url", "%v", err)
	}
}

// backendOptions are the backend's options of the settings.
func (c *Config) backendOptions() clusterredis.Options {
	return clusterredis.Options{
		Prefix:           c.RedisPrefix,
		MaxSubscriptions: c.MaxSubs,
		ShardedPubSub:    clusterredis.ShardedPubSub(c.RedisSharded),
		WaitReplicas:     c.RedisWait,
		WaitTimeout:      c.RedisWaitTO,
		Pipelines:        cmp.Or(c.RedisPipelines, -1), // 0: every call alone
		MaxPipelineCalls: c.RedisPipeCalls,
		AppendLinger:     c.RedisLinger,
		Eviction:         clusterredis.Eviction(c.RedisEviction),
		EvictionCheck:    c.RedisEvictCheck,
	}
}

// openRedis connects to Redis with the settings and returns the backend,
// which closes the client when it closes. As redisbackend.Open, it makes
// each command a span only when a tracer provider is installed.
func openRedis(ctx context.Context, cfg *Config, log *zerolog.Logger) (*mcp.Backend, error) {
	conn := cfg.redisConn()
	conn.Logger = log.With().Str("component", "redis-conn").Logger()
	client, err := clusterredis.NewClient(cfg.RedisURL, conn)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if telemetry.Enabled() {
		if err := redisotel.InstrumentTracing(client, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("redis: tracing: %w", err)
		}
	}
	clusterredis.RouteClientLogs(*log)
	o := cfg.backendOptions()
	o.Logger, o.CloseClient = *log, true
	b, err := clusterredis.New(ctx, client, o)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return backendwrap.Wrap(b).(*mcp.Backend), nil
}
