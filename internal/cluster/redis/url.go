package redis

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// ParseURL turns a Redis address into client options for
// redis.NewUniversalClient. Accepted forms:
//
//	redis://[user:pass@]host[:port][/db][?options]      one server
//	rediss://...                                        one server over TLS
//	unix://[user:pass@]/path/redis.sock[?db=N&options]  one server on a unix socket
//	redis-sentinel://[user:pass@]h1:26379,h2:26379/master[/db][?options]
//	redis-cluster://[user:pass@]h1:6379,h2:6379[?options]
//
// and "rediss-sentinel" / "rediss-cluster" for TLS. user:pass authenticate
// to the Redis servers; Sentinel's own credentials go in the
// sentinel_username and sentinel_password options. The other options are
// go-redis's URL options (db, dial_timeout, read_timeout, pool_size,
// client_name, protocol, ...); unknown ones are an error.
func ParseURL(s string) (*goredis.UniversalOptions, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("redis url: missing scheme in %q", redact(s))
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := goredis.ParseURL(s)
		if err != nil {
			return nil, fmt.Errorf("redis url %q: %w", redact(s), err)
		}
		u := universal(o)
		if o.Network == "unix" {
			u.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", addr)
			}
		}
		return u, nil
	case "redis-sentinel", "rediss-sentinel", "redis-cluster", "rediss-cluster":
	default:
		return nil, fmt.Errorf("redis url %q: unknown scheme %q", redact(s), scheme)
	}
	base, kind, _ := strings.Cut(scheme, "-")

	// Split the host list off by hand: net/url rejects "h1:1,h2:2".
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i+1], authority[i+1:]
	}
	var hosts []string
	for h := range strings.SplitSeq(hostlist, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("redis url %q: no hosts", redact(s))
	}
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("redis url %q: %w", redact(s), err)
	}
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")

	var master string
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if kind == "sentinel" {
		if len(segs) == 0 {
			return nil, fmt.Errorf("redis url %q: missing master name (redis-sentinel://hosts/master)", redact(s))
		}
		master, segs = segs[0], segs[1:]
	}
	if kind == "cluster" && len(segs) > 0 {
		return nil, fmt.Errorf("redis url %q: Redis Cluster has no database path", redact(s))
	}
	// Let go-redis parse credentials, db and options on a one-host URL.
	one := base + "://" + userinfo + hosts[0] + "/" + strings.Join(segs, "/")
	if enc := q.Encode(); enc != "" {
		one += "?" + enc
	}
	o, err := goredis.ParseURL(one)
	if err != nil {
		return nil, fmt.Errorf("redis url %q: %w", redact(s), err)
	}
	u := universal(o)
	u.Addrs = nil
	for _, h := range hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			port := "6379"
			if kind == "sentinel" {
				port = "26379"
			}
			h = net.JoinHostPort(strings.Trim(h, "[]"), port)
		}
		u.Addrs = append(u.Addrs, h)
	}
	if kind == "sentinel" {
		u.MasterName = master
		u.SentinelUsername, u.SentinelPassword = sentinelUser, sentinelPass
	} else {
		if sentinelUser != "" || sentinelPass != "" {
			return nil, fmt.Errorf("redis url %q: sentinel options on a cluster url", redact(s))
		}
		if o.DB != 0 {
			return nil, fmt.Errorf("redis url %q: Redis Cluster has only database 0", redact(s))
		}
		u.IsClusterMode = true
	}
	return u, nil
}

// universal copies the options go-redis's URL parser sets.
func universal(o *goredis.Options) *goredis.UniversalOptions {
	return &goredis.UniversalOptions{
		Addrs:              []string{o.Addr},
		ClientName:         o.ClientName,
		DB:                 o.DB,
		Protocol:           o.Protocol,
		Username:           o.Username,
		Password:           o.Password,
		MaxRetries:         o.MaxRetries,
		MinRetryBackoff:    o.MinRetryBackoff,
		MaxRetryBackoff:    o.MaxRetryBackoff,
		DialTimeout:        o.DialTimeout,
		DialerRetries:      o.DialerRetries,
		DialerRetryTimeout: o.DialerRetryTimeout,
		ReadTimeout:        o.ReadTimeout,
		WriteTimeout:       o.WriteTimeout,
		PoolFIFO:           o.PoolFIFO,
		PoolSize:           o.PoolSize,
		PoolTimeout:        o.PoolTimeout,
		MinIdleConns:       o.MinIdleConns,
		MaxIdleConns:       o.MaxIdleConns,
		MaxActiveConns:     o.MaxActiveConns,
		ConnMaxIdleTime:    o.ConnMaxIdleTime,
		ConnMaxLifetime:    o.ConnMaxLifetime,
		TLSConfig:          o.TLSConfig,
		DisableIdentity:    o.DisableIdentity,
		IdentitySuffix:     o.IdentitySuffix,
	}
}

// redact hides a password in a URL for error messages.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return s
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
