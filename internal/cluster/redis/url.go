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
// sentinel_username and sentinel_password options.
//
// The parsing is go-redis's own: ParseURL for one server, ParseClusterURL
// for a cluster and ParseFailoverURL for Sentinel, so the options are
// theirs (db, dial_timeout, read_timeout, pool_size, client_name,
// protocol, and for a cluster read_only, route_by_latency, route_randomly,
// max_redirects, ...), and unknown ones are an error. What is ours is only
// the host-list form above, which go-redis spells with repeated "addr"
// options, the default Sentinel port 26379, and that pipelines share the
// connection pool (go-redis's own pipeline pool only when the URL sets
// pipeline_pool_size).
func ParseURL(s string) (*goredis.UniversalOptions, error) {
	o, err := parseURL(s)
	if err == nil && o.PipelinePoolSize == 0 {
		// go-redis gives pipelines a pool of their own (10 connections
		// by default) beside PoolSize: the backend's shared round trips
		// are pipelines, and the node's connections stay bounded by the
		// pool size it was given (pipeline_pool_size in the URL still
		// sets one).
		o.PipelinePoolSize = -1
	}
	return o, err
}

func parseURL(s string) (*goredis.UniversalOptions, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("redis url: missing scheme in %q", redact(s))
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := goredis.ParseURL(s)
		if err != nil {
			return nil, urlError(s, err)
		}
		u := fromOptions(o)
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
	defaultPort := "6379"
	if kind == "sentinel" {
		defaultPort = "26379"
	}

	// Split the host list off by hand: net/url rejects "h1:1,h2:2".
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	var user *url.Userinfo
	hostlist := authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		u, err := url.Parse(base + "://" + authority[:i+1] + "h")
		if err != nil {
			return nil, fmt.Errorf("redis url %q: bad user info", redact(s))
		}
		user, hostlist = u.User, authority[i+1:]
	}
	var hosts []string
	for h := range strings.SplitSeq(hostlist, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), defaultPort)
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("redis url %q: no hosts", redact(s))
	}
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("redis url %q: %w", redact(s), err)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })

	if kind == "cluster" {
		if len(segs) > 0 {
			return nil, fmt.Errorf("redis url %q: Redis Cluster has no database path", redact(s))
		}
		gu := url.URL{Scheme: base, User: user, Host: hosts[0], RawQuery: q.Encode()}
		o, err := goredis.ParseClusterURL(gu.String())
		if err != nil {
			return nil, urlError(s, err)
		}
		return fromClusterOptions(o), nil
	}

	// go-redis's Sentinel URL carries Sentinel's credentials as user
	// info, the master's in the username and password options, and the
	// master's name in master_name.
	if len(segs) == 0 {
		return nil, fmt.Errorf("redis url %q: missing master name (redis-sentinel://hosts/master)", redact(s))
	}
	q.Set("master_name", segs[0])
	if user != nil {
		q.Set("username", user.Username())
		if p, ok := user.Password(); ok {
			q.Set("password", p)
		}
	}
	var sentinel *url.Userinfo
	if su, sp := q.Get("sentinel_username"), q.Get("sentinel_password"); su != "" || sp != "" {
		sentinel = url.UserPassword(su, sp)
	}
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	gu := url.URL{Scheme: base, User: sentinel, Host: hosts[0], Path: "/" + strings.Join(segs[1:], "/"), RawQuery: q.Encode()}
	o, err := goredis.ParseFailoverURL(gu.String())
	if err != nil {
		return nil, urlError(s, err)
	}
	if o.ReplicaOnly || o.UseDisconnectedReplicas {
		return nil, fmt.Errorf("redis url %q: replica_only and use_disconnected_replicas are not supported", redact(s))
	}
	return fromFailoverOptions(o), nil
}

// urlError wraps an error of go-redis's parsers, which can quote the URL
// they were given.
func urlError(s string, err error) error {
	return fmt.Errorf("redis url %q: %s", redact(s), hide(err.Error(), secrets(s)))
}

// secrets lists the passwords written in a Redis URL: the one in its user
// info and a sentinel_password option.
func secrets(s string) []string {
	var out []string
	_, rest, _ := strings.Cut(s, "://")
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, p, ok := strings.Cut(authority[:at], ":"); ok {
			out = append(out, p)
			if u, err := url.PathUnescape(p); err == nil {
				out = append(out, u)
			}
		}
	}
	if _, query, ok := strings.Cut(tail, "?"); ok {
		if q, err := url.ParseQuery(query); err == nil {
			out = append(out, q["sentinel_password"]...)
			out = append(out, q["password"]...)
		}
	}
	return out
}

// redact hides the passwords of a URL for error messages: the one in
// its user info and those of the password options.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		user, _, _ := strings.Cut(rest[:at], ":")
		rest = user + ":xxxxx" + rest[at:]
	}
	base, query, ok := strings.Cut(rest, "?")
	if !ok {
		return scheme + "://" + rest
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		if k, _, _ := strings.Cut(p, "="); k == "password" || k == "sentinel_password" {
			params[i] = k + "=xxxxx"
		}
	}
	return scheme + "://" + base + "?" + strings.Join(params, "&")
}

// hide replaces each secret in msg, as written or escaped, by "xxxxx".
func hide(msg string, secrets []string) string {
	for _, p := range secrets {
		for _, form := range []string{p, url.QueryEscape(p), url.PathEscape(p)} {
			if form != "" {
				msg = strings.ReplaceAll(msg, form, "xxxxx")
			}
		}
	}
	return msg
}
