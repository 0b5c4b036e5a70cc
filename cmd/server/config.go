package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/internal/seal"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/auth"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// Config is every setting of the reference node. Each has a flag and an
// environment variable; the flag wins. The defaults are in settings(),
// which takes those of the mcp options from the mcp package.
type Config struct {
	Addr            string
	MetricsAddr     string
	Pprof           bool
	Path            string
	Stdio           bool
	Tools           string
	SkillsDir       string
	MaxSkillFile    int
	RedisURL        string
	RedisSharded    string
	RedisPrefix     string
	RedisUsername   string
	RedisPassFile   string
	RedisCAFile     string
	RedisCertFile   string
	RedisKeyFile    string
	RedisTLSName    string
	RedisPoolSize   int
	RedisMinIdle    int
	RedisDialTO     time.Duration
	RedisReadTO     time.Duration
	RedisWriteTO    time.Duration
	RedisWait       int
	RedisWaitTO     time.Duration
	RedisPipelines  int
	RedisPipeCalls  int
	RedisLinger     time.Duration
	RedisEviction   string
	RedisEvictCheck time.Duration
	NodeID          string
	StateKey        string
	StateKeyFile    string
	SessionTTL      time.Duration
	MaxSessions     int
	MaxBodyBytes    int64
	RetryHint       time.Duration
	KeepAlive       time.Duration
	MaxEvents       int
	MaxStreams      int
	HistoryTTL      time.Duration
	RequestTimeout  time.Duration
	ResumeGrace     time.Duration
	MaxWaiters      int
	SessionWaiters  int
	MaxSubs         int
	MaxClientInfo   int
	MaxCaps         int
	MaxURI          int
	MaxFanOuts      int
	LeaseTTL        time.Duration
	RecordTimeout   time.Duration
	RecordRetry     time.Duration
	TaskTTL         time.Duration
	MinTaskTTL      time.Duration
	MaxTaskTTL      time.Duration
	TaskPoll        time.Duration
	MaxTasks        int
	MaxTaskResult   int
	TaskCache       int
	TaskAttempts    int
	TaskSweep       int
	SessionCache    time.Duration
	MaxHandlers     int
	MaxSessionHdl   int
	MaxBatch        int
	StreamBacklog   int
	MaxInflight     int64
	BodyTimeout     time.Duration
	MaxOpenStreams  int
	WriteTimeout    time.Duration
	StreamLifetime  time.Duration
	PageSize        int
	AllowedOrigins  string
	AllowedHosts    string
	CallerSessions  int
	CallerStreams   int
	CallerRate      int
	CallerBurst     int
	TrustedProxies  string
	CallerLimitsOff bool
	DrainDelay      time.Duration
	DrainTimeout    time.Duration
	LogLevel        string
	LogFormat       string
	AccessLog       bool
	BackendRetryMax time.Duration
	Auth            auth.Config // off unless --auth-issuer is set
	ToolScopes      string      // --auth-tool-scopes

	stateKeys [][]byte // parsed from StateKey or StateKeyFile by Validate
}

// setting describes one configuration value. A setting whose default is
// "true" or "false" is a boolean: its flag works bare (--stdio), as
// --stdio=true or --stdio=false, and its variable takes any value
// strconv.ParseBool accepts.
type setting struct {
	flag, env, def, help string
	set                  func(c *Config, v string) error
}

func (s setting) boolean() bool { return s.def == "true" || s.def == "false" }

func boolSetter(f func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean (true or false): %q", v)
		}
		*f(c) = b
		return nil
	}
}

func durationSetter(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 30s, 5m): %q", v)
		}
		*f(c) = d
		return nil
	}
}

func intSetter(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*f(c) = n
		return nil
	}
}

func int64Setter(f func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*f(c) = n
		return nil
	}
}

func stringSetter(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = v; return nil }
}

// itoa and dur write a default in the table's form.
func itoa[T int | int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// dur writes d without zero trailing units: 30m, not 30m0s.
func dur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// settings is the one table of every setting. The defaults of the
// settings that mcp options carry are those options' defaults
// (mcp.DefaultHTTPOptions and its siblings), so they are written down
// in one place.
func settings() []setting {
	h, sv, st := mcp.DefaultHTTPOptions(), mcp.DefaultServerOptions(), mcp.DefaultStdioOptions()
	rc := clusterredis.DefaultConnOptions()
	return []setting{
		{"addr", "MCP_ADDR", "127.0.0.1:8080", "HTTP listen address", stringSetter(func(c *Config) *string { return &c.Addr })},
		{"metrics-addr", "MCP_METRICS_ADDR", "127.0.0.1:7979", "listen address of /metrics (with /healthz and /readyz), apart from the MCP endpoint; empty serves /metrics on --addr. The port is outside Prometheus's own (9090-9094) and its exporters' (9100-9999)", stringSetter(func(c *Config) *string { return &c.MetricsAddr })},
		{"pprof", "MCP_PPROF", "false", "also serve Go's runtime profiles (net/http/pprof) at /debug/pprof/ on the --metrics-addr listener, for profiling a node under load; needs --metrics-addr", boolSetter(func(c *Config) *bool { return &c.Pprof })},
		{"path", "MCP_PATH", "/mcp", "path of the MCP endpoint", stringSetter(func(c *Config) *string { return &c.Path })},
		{"stdio", "MCP_STDIO", "false", "serve over stdin/stdout instead of HTTP", boolSetter(func(c *Config) *bool { return &c.Stdio })},
		{"tools", "MCP_TOOLS", "demo", "tool pack to serve: demo or conformance", stringSetter(func(c *Config) *string { return &c.Tools })},
		{"skills-dir", "MCP_SKILLS_DIR", "", "folder of skills (the Skills extension) served beside the tool pack's: each folder below it holding a SKILL.md is a skill at its path (skill://PATH/SKILL.md), read at start-up; every node of a cluster needs the same folder (the Helm chart mounts ConfigMaps). A bad skill stops the node with an error naming it", stringSetter(func(c *Config) *string { return &c.SkillsDir })},
		{"max-skill-file-bytes", "MCP_MAX_SKILL_FILE_BYTES", itoa(sv.MaxSkillFileBytes), "largest file of a skill; a larger one stops the node at start-up with an error naming it (a skill also holds at most 512 files and 16 MiB, the extension's bounds)", intSetter(func(c *Config) *int { return &c.MaxSkillFile })},
		{"redis-url", "MCP_REDIS_URL", "", "Redis URL; joins the cluster (redis://, rediss://, unix://, redis-sentinel://h1,h2/master, redis-cluster://h1,h2); empty runs on the in-memory backend", stringSetter(func(c *Config) *string { return &c.RedisURL })},
		{"redis-sharded-pubsub", "MCP_REDIS_SHARDED_PUBSUB", "auto", "pub/sub on Redis Cluster: auto reads classic and sharded channels and publishes sharded (SPUBLISH) once every live node reads them, on a Cluster of Redis 7.0 or newer; on publishes sharded at once (every node runs a version that reads them) and refuses to start where it cannot; off keeps classic PUBLISH/SUBSCRIBE. A standalone server or Sentinel always uses classic", stringSetter(func(c *Config) *string { return &c.RedisSharded })},
		{"redis-prefix", "MCP_REDIS_PREFIX", clusterredis.DefaultPrefix, "start of every Redis key and pub/sub channel of the deployment (letters, digits, '.', '_' and '-'): deployments sharing one Redis need prefixes of their own. An ACL user of the deployment with prefix P needs the key patterns P:* and {P:nodes}:sharded and the channel pattern P:*", stringSetter(func(c *Config) *string { return &c.RedisPrefix })},
		{"redis-username", "MCP_REDIS_USERNAME", "", "ACL user the node authenticates to Redis as (or the user of --redis-url, not both)", stringSetter(func(c *Config) *string { return &c.RedisUsername })},
		{"redis-password-file", "MCP_REDIS_PASSWORD_FILE", "", "file holding the Redis password (of --redis-username, else of the default user), e.g. a mounted secret: read again when it changes, for the next connections, so a rotated password needs no restart (give the user the new password beside the old one, change the file, then remove the old one). --redis-url then holds none (a password in the URL works too, and is never logged). Sentinel's own password stays the URL's sentinel_password", stringSetter(func(c *Config) *string { return &c.RedisPassFile })},
		{"redis-ca-file", "MCP_REDIS_CA_FILE", "", "PEM file of the authorities the Redis servers' certificates must chain to (a private CA), instead of the system's; read again when it changes. The TLS settings need a TLS URL (rediss://, rediss-sentinel://, rediss-cluster://); TLS is 1.2 or newer", stringSetter(func(c *Config) *string { return &c.RedisCAFile })},
		{"redis-cert-file", "MCP_REDIS_CERT_FILE", "", "PEM client certificate (with its intermediates) the node presents to Redis (tls-auth-clients), with --redis-key-file; both are read again when they change, so a rotated certificate is presented from the next connection on, without a restart", stringSetter(func(c *Config) *string { return &c.RedisCertFile })},
		{"redis-key-file", "MCP_REDIS_KEY_FILE", "", "PEM private key of --redis-cert-file", stringSetter(func(c *Config) *string { return &c.RedisKeyFile })},
		{"redis-tls-server-name", "MCP_REDIS_TLS_SERVER_NAME", "", "name the Redis servers' certificates must carry (and the one sent in SNI) when it is not the host of --redis-url", stringSetter(func(c *Config) *string { return &c.RedisTLSName })},
		{"redis-pool-size", "MCP_REDIS_POOL_SIZE", itoa(rc.PoolSize), "connections to each Redis server in the node's command pool (the pub/sub connections aside); 0: go-redis's default, 10 per CPU (GOMAXPROCS), 5 per CPU to each node of a Cluster, which make bench measures. An option of --redis-url (pool_size, min_idle_conns, dial_timeout, read_timeout, write_timeout) wins over its setting", intSetter(func(c *Config) *int { return &c.RedisPoolSize })},
		{"redis-min-idle-conns", "MCP_REDIS_MIN_IDLE_CONNS", itoa(rc.MinIdleConns), "idle connections the pool keeps open to each server, ready for a command without a dial (and TLS handshake) first; at most --redis-pool-size", intSetter(func(c *Config) *int { return &c.RedisMinIdle })},
		{"redis-dial-timeout", "MCP_REDIS_DIAL_TIMEOUT", dur(rc.DialTimeout), "time to open a Redis connection, TLS handshake and authentication included", durationSetter(func(c *Config) *time.Duration { return &c.RedisDialTO })},
		{"redis-read-timeout", "MCP_REDIS_READ_TIMEOUT", dur(rc.ReadTimeout), "time a Redis reply may take; past it the command fails (and is tried again on a new connection)", durationSetter(func(c *Config) *time.Duration { return &c.RedisReadTO })},
		{"redis-write-timeout", "MCP_REDIS_WRITE_TIMEOUT", dur(rc.WriteTimeout), "time writing a command to Redis may take", durationSetter(func(c *Config) *time.Duration { return &c.RedisWriteTO })},
		{"redis-wait-replicas", "MCP_REDIS_WAIT_REPLICAS", "0", "replicas that must have each write a client is told about (a session's creation, a stream's events, a task's record) before the client hears of it; a write they did not acknowledge within --redis-wait-timeout answers -31000 (retry). With Sentinel, 1 keeps every acknowledged write across a failover to an acknowledging replica; it costs a replication round trip per write (one server only, not Cluster)", intSetter(func(c *Config) *int { return &c.RedisWait })},
		{"redis-wait-timeout", "MCP_REDIS_WAIT_TIMEOUT", dur(clusterredis.DefaultWaitTimeout), "how long a write waits for --redis-wait-replicas", durationSetter(func(c *Config) *time.Duration { return &c.RedisWaitTO })},
		{"redis-pipelines", "MCP_REDIS_PIPELINES", strconv.Itoa(clusterredis.DefaultPipelines), "round trips of the node's script calls (appends, session and task writes) in flight at once; calls made while that many are in flight wait and share the next round trip as one pipeline, so a busy node sends one round trip for many streams. 0 sends every call alone, at once", intSetter(func(c *Config) *int { return &c.RedisPipelines })},
		{"redis-pipeline-calls", "MCP_REDIS_PIPELINE_CALLS", strconv.Itoa(clusterredis.DefaultMaxPipelineCalls), "most script calls one shared round trip carries (--redis-pipelines)", intSetter(func(c *Config) *int { return &c.RedisPipeCalls })},
		{"redis-append-linger", "MCP_REDIS_APPEND_LINGER", "0s", "how long a response stream's notifications (progress, log messages; not a server→client request, not the final response, which end the wait) may wait for other writes to share their round trip to Redis when they would go alone; each reaches its client up to that much later, and Redis and the node spend less CPU per paced event (docs/BENCHMARKS.md). 0 records them at once", durationSetter(func(c *Config) *time.Duration { return &c.RedisLinger })},
		{"redis-eviction", "MCP_REDIS_EVICTION", string(clusterredis.EvictionUnready), "what the node does when Redis's maxmemory-policy may evict its keys (every key has a TTL, so volatile-lru, the managed services' default, and the other volatile-* and allkeys-* policies evict ours first under memory pressure: sessions, streams and tasks vanish); a maxmemory of 0 never evicts. unready logs an error and fails /readyz with the policy as the reason, serving what it is sent; refuse stops the node at start-up; accept logs a warning and stays ready. The policy of every primary is read with INFO memory (which managed services allow where CONFIG GET is refused) at start and every --redis-eviction-check, and Redis's evicted_keys growing is logged (at most once a minute) and exported (mcp_redis_evicted_keys)", stringSetter(func(c *Config) *string { return &c.RedisEviction })},
		{"redis-eviction-check", "MCP_REDIS_EVICTION_CHECK", dur(clusterredis.DefaultEvictionCheck), "how often the node reads Redis's maxmemory-policy and evicted_keys again (--redis-eviction)", durationSetter(func(c *Config) *time.Duration { return &c.RedisEvictCheck })},
		{"node-id", "MCP_NODE_ID", "", "id of this node in logs, metrics and request ids (default: random); a restarted process may reuse it, since each start also draws an incarnation", stringSetter(func(c *Config) *string { return &c.NodeID })},
		{"state-key", "MCP_STATE_KEY", "", "shared key sealing MRTR requestState: 32 bytes as 64 hex chars or base64 (comma-separated for rotation, newest first); every node of a cluster needs the same, and a node with a Redis URL refuses to start without one. Prefer the environment variable or --state-key-file: a flag's value is visible to every user through ps", stringSetter(func(c *Config) *string { return &c.StateKey })},
		{"state-key-file", "MCP_STATE_KEY_FILE", "", "file holding the state key in the form of --state-key (keys separated by commas or newlines, newest first), e.g. a mounted secret", stringSetter(func(c *Config) *string { return &c.StateKeyFile })},
		{"session-ttl", "MCP_SESSION_TTL", dur(h.SessionTTL), "idle timeout of a session", durationSetter(func(c *Config) *time.Duration { return &c.SessionTTL })},
		{"max-sessions", "MCP_MAX_SESSIONS", itoa(h.MaxSessions), "cap on live sessions in the deployment", intSetter(func(c *Config) *int { return &c.MaxSessions })},
		{"max-body-bytes", "MCP_MAX_BODY_BYTES", itoa(h.MaxBodyBytes), "maximum POST body size", int64Setter(func(c *Config) *int64 { return &c.MaxBodyBytes })},
		{"max-handlers", "MCP_MAX_HANDLERS", itoa(h.MaxHandlers), "request handlers running at once on a node (each batch member counts); more get 503 with Retry-After", intSetter(func(c *Config) *int { return &c.MaxHandlers })},
		{"max-session-handlers", "MCP_MAX_SESSION_HANDLERS", itoa(h.MaxSessionHandlers), "one session's share of --max-handlers on a node; more get 429 with Retry-After (over stdio, the connection's bound: more get -31000)", intSetter(func(c *Config) *int { return &c.MaxSessionHdl })},
		{"max-stream-backlog", "MCP_MAX_STREAM_BACKLOG", itoa(h.MaxStreamBacklog), "notifications a handler may have queued on its response stream for recording; past it the handler waits until the queue drains", intSetter(func(c *Config) *int { return &c.StreamBacklog })},
		{"max-batch", "MCP_MAX_BATCH", itoa(h.MaxBatch), "members of a 2025-03-26 JSON-RPC batch; a larger batch gets 413 (over stdio, one error)", intSetter(func(c *Config) *int { return &c.MaxBatch })},
		{"max-inflight-bytes", "MCP_MAX_INFLIGHT_BYTES", itoa(h.MaxInflightBytes), "request body bytes a node holds at once (at least --max-body-bytes); new work past it gets 503 with Retry-After before its body is read", int64Setter(func(c *Config) *int64 { return &c.MaxInflight })},
		{"body-read-timeout", "MCP_BODY_READ_TIMEOUT", dur(h.BodyReadTimeout), "time to receive a POST body after its headers; a stalled body gets 408 (streams are not affected)", durationSetter(func(c *Config) *time.Duration { return &c.BodyTimeout })},
		{"max-open-streams", "MCP_MAX_OPEN_STREAMS", itoa(h.MaxOpenStreams), "GET, resumed and subscriptions/listen streams open on a node; more get 503 with Retry-After", intSetter(func(c *Config) *int { return &c.MaxOpenStreams })},
		{"stream-write-timeout", "MCP_STREAM_WRITE_TIMEOUT", dur(h.StreamWriteTimeout), "time one SSE write may block; a client that stops reading loses its stream after it", durationSetter(func(c *Config) *time.Duration { return &c.WriteTimeout })},
		{"max-stream-lifetime", "MCP_MAX_STREAM_LIFETIME", dur(h.MaxStreamLifetime), "how long a GET or subscriptions/listen stream stays open; then a GET stream ends with the retry hint (the client reconnects and resumes) and a listen stream with its result", durationSetter(func(c *Config) *time.Duration { return &c.StreamLifetime })},
		{"retry", "MCP_RETRY", dur(h.RetryHint), "SSE retry hint sent to clients", durationSetter(func(c *Config) *time.Duration { return &c.RetryHint })},
		{"keepalive", "MCP_KEEPALIVE", dur(h.KeepAlive), "interval of SSE comment keep-alives", durationSetter(func(c *Config) *time.Duration { return &c.KeepAlive })},
		{"max-events", "MCP_MAX_EVENTS", itoa(h.MaxEvents), "events kept per stream for resumption", intSetter(func(c *Config) *int { return &c.MaxEvents })},
		{"max-streams", "MCP_MAX_STREAMS", itoa(h.MaxStreams), "ended streams per session keeping history for resumption (LRU); a stream not yet ended (a live GET or POST stream) is always kept", intSetter(func(c *Config) *int { return &c.MaxStreams })},
		{"history-ttl", "MCP_HISTORY_TTL", dur(h.HistoryTTL), "how long a stream's history lives after its last event, or after its connection closed while one was open", durationSetter(func(c *Config) *time.Duration { return &c.HistoryTTL })},
		{"request-timeout", "MCP_REQUEST_TIMEOUT", dur(sv.RequestTimeout), "how long a server→client request waits for its reply", durationSetter(func(c *Config) *time.Duration { return &c.RequestTimeout })},
		{"resume-grace", "MCP_RESUME_GRACE", dur(h.ResumeGrace), "how long a request waits for a dropped stream to be resumed", durationSetter(func(c *Config) *time.Duration { return &c.ResumeGrace })},
		{"max-waiters", "MCP_MAX_WAITERS", itoa(h.MaxWaiters), "pending server→client requests per node", intSetter(func(c *Config) *int { return &c.MaxWaiters })},
		{"max-waiters-per-session", "MCP_MAX_WAITERS_PER_SESSION", itoa(h.MaxWaitersPerSession), "one session's share of --max-waiters: its pending server→client requests on a node (at most half of --max-waiters)", intSetter(func(c *Config) *int { return &c.SessionWaiters })},
		{"max-subscriptions", "MCP_MAX_SUBSCRIPTIONS", itoa(mcp.DefaultMaxSubscriptions), "resource subscriptions one session may hold, and entries of each list in a subscriptions/listen filter", intSetter(func(c *Config) *int { return &c.MaxSubs })},
		{"max-client-info-bytes", "MCP_MAX_CLIENT_INFO_BYTES", itoa(sv.MaxClientInfoBytes), "largest clientInfo (encoded) initialize accepts; the session stores it", intSetter(func(c *Config) *int { return &c.MaxClientInfo })},
		{"max-capabilities-bytes", "MCP_MAX_CAPABILITIES_BYTES", itoa(sv.MaxCapabilitiesBytes), "largest client capabilities (encoded) initialize accepts; the session stores them", intSetter(func(c *Config) *int { return &c.MaxCaps })},
		{"max-uri-bytes", "MCP_MAX_URI_BYTES", itoa(sv.MaxURIBytes), "longest uri resources/subscribe (and each resourceSubscriptions entry of subscriptions/listen) accepts; the session stores it", intSetter(func(c *Config) *int { return &c.MaxURI })},
		{"max-fanouts", "MCP_MAX_FANOUTS", itoa(h.MaxFanOuts), "notification fan-outs (list_changed, resources/updated) a node runs at once; the same notification waits at most once", intSetter(func(c *Config) *int { return &c.MaxFanOuts })},
		{"lease-ttl", "MCP_LEASE_TTL", dur(h.LeaseTTL), "membership lease of a node; a dead node's streams end this long after it stops", durationSetter(func(c *Config) *time.Duration { return &c.LeaseTTL })},
		{"record-timeout", "MCP_RECORD_TIMEOUT", dur(h.RecordTimeout), "how long a node keeps trying to record a request's final response when Redis fails (the live connection gets it at once); past it, clients resuming the stream get an error", durationSetter(func(c *Config) *time.Duration { return &c.RecordTimeout })},
		{"record-retry", "MCP_RECORD_RETRY", dur(h.RecordRetry), "how long a node keeps trying to record a stream's events when Redis fails, holding the events after them; past it the stream ends at the first event not recorded and the call fails with -31000", durationSetter(func(c *Config) *time.Duration { return &c.RecordRetry })},
		{"task-ttl", "MCP_TASK_TTL", dur(h.TaskTTL), "how long a task's record (its status and result) lives after the task is created, when the client names no TTL", durationSetter(func(c *Config) *time.Duration { return &c.TaskTTL })},
		{"min-task-ttl", "MCP_MIN_TASK_TTL", dur(h.MinTaskTTL), "shortest task TTL a client may ask for; a shorter one is refused (-32602)", durationSetter(func(c *Config) *time.Duration { return &c.MinTaskTTL })},
		{"max-task-ttl", "MCP_MAX_TASK_TTL", dur(h.MaxTaskTTL), "longest task TTL a client may ask for; a longer one is refused (-32602)", durationSetter(func(c *Config) *time.Duration { return &c.MaxTaskTTL })},
		{"task-poll-interval", "MCP_TASK_POLL_INTERVAL", dur(h.TaskPollInterval), "poll interval suggested to clients in each task (pollIntervalMs)", durationSetter(func(c *Config) *time.Duration { return &c.TaskPoll })},
		{"max-tasks-per-owner", "MCP_MAX_TASKS_PER_OWNER", itoa(h.MaxTasksPerOwner), "live task records of one principal (or one client address without authorization); past it a call that would start a task is refused", intSetter(func(c *Config) *int { return &c.MaxTasks })},
		{"max-task-result-bytes", "MCP_MAX_TASK_RESULT_BYTES", itoa(h.MaxTaskResultBytes), "largest result (encoded) a task keeps; a larger one fails the task with an error saying so", intSetter(func(c *Config) *int { return &c.MaxTaskResult })},
		{"task-cache-bytes", "MCP_TASK_CACHE_BYTES", itoa(h.TaskCacheBytes), "records of ended tasks a node keeps, in bytes, to answer tasks/get and tasks/result without reading Redis again (an ended task's record never changes until its TTL ends); the oldest go first", intSetter(func(c *Config) *int { return &c.TaskCache })},
		{"task-attempts", "MCP_TASK_ATTEMPTS", itoa(h.TaskAttempts), "runs of an idempotent task (idempotentHint) whose node was lost: it is taken over by a live node until this many attempts, then fails", intSetter(func(c *Config) *int { return &c.TaskAttempts })},
		{"task-sweep-batch", "MCP_TASK_SWEEP_BATCH", itoa(h.TaskSweepBatch), "tasks of lost nodes one sweep ends (every third of the lease, one live node per lost node): each fails, or is taken over when idempotent, although no client reads it", intSetter(func(c *Config) *int { return &c.TaskSweep })},
		{"session-cache-ttl", "MCP_SESSION_CACHE_TTL", dur(h.SessionCacheTTL), "reuse a session a node created or read this long instead of reading Redis on every request (0 reads every time; at most a quarter of --session-ttl; set it alike on every node). A change (logging/setLevel, DELETE) is answered once every other node has acknowledged dropping its copy, or after 500ms past which a node that did not acknowledge no longer answers from its copy (a node uses its copies only while it has received every change published up to 250ms ago), so the next request sees it on any node. Each answer from a copy first checks the node's Redis pub/sub connection without a round trip: when Redis is down or the connection closed, the request fails with 503 as without the cache; a partition that delivers nothing stops the copies within 250ms. The TTL bounds what remains: a copy used right after the bus returns from an outage, before the node resyncs; a node not yet known to the one making a change; a session Redis evicts. Linux only (elsewhere copies are never used)", durationSetter(func(c *Config) *time.Duration { return &c.SessionCache })},
		{"page-size", "MCP_PAGE_SIZE", itoa(sv.PageSize), "items per page of list results", intSetter(func(c *Config) *int { return &c.PageSize })},
		{"allowed-origins", "MCP_ALLOWED_ORIGINS", "", "comma-separated Origin values accepted besides loopback ones on a loopback address (* for any)", stringSetter(func(c *Config) *string { return &c.AllowedOrigins })},
		{"allowed-hosts", "MCP_ALLOWED_HOSTS", "", "comma-separated Host names accepted besides loopback ones (name or name:port; * for any); empty: a request arriving on a loopback address must name a loopback host (DNS-rebinding protection), others any; set: every request must name a listed or loopback host", stringSetter(func(c *Config) *string { return &c.AllowedHosts })},
		{"caller-max-sessions", "MCP_CALLER_MAX_SESSIONS", itoa(h.MaxCallerSessions), "live sessions one caller (its principal, else its client address) may hold in the deployment; more get 429 with Retry-After. Never more than half of --max-sessions, so that one caller cannot fill the cap", intSetter(func(c *Config) *int { return &c.CallerSessions })},
		{"caller-max-streams", "MCP_CALLER_MAX_STREAMS", itoa(h.MaxCallerStreams), "GET, resumed and subscriptions/listen streams one caller may have open in the deployment; more get 429 with Retry-After", intSetter(func(c *Config) *int { return &c.CallerStreams })},
		{"caller-rate", "MCP_CALLER_RATE", itoa(h.CallerRate), "requests a second one caller may make to the deployment (a token bucket in the shared store, checked without a round trip per request: each node may let a caller past it by two of its debit thresholds, at most a quarter of --caller-burst and near the limit 40ms of the rate, before it learns of the debt, which the caller then waits out)", intSetter(func(c *Config) *int { return &c.CallerRate })},
		{"caller-burst", "MCP_CALLER_BURST", itoa(h.CallerBurst), "requests one caller may make at once, on top of --caller-rate; past both, 429 with Retry-After until the bucket refills", intSetter(func(c *Config) *int { return &c.CallerBurst })},
		{"trusted-proxies", "MCP_TRUSTED_PROXIES", "", "comma-separated CIDR ranges or addresses of the proxies in front of the nodes: from them, X-Forwarded-For (or Forwarded) names the client an anonymous caller is counted as (the rightmost untrusted hop); from any other peer those headers are ignored. IPv6 clients count by /64", stringSetter(func(c *Config) *string { return &c.TrustedProxies })},
		{"caller-limits-off", "MCP_CALLER_LIMITS_OFF", "false", "turn the per-caller limits (--caller-*) off, when a gateway in front enforces its own", boolSetter(func(c *Config) *bool { return &c.CallerLimitsOff })},
		{"auth-issuer", "MCP_AUTH_ISSUER", "", "OAuth authorization server (issuer identifier) whose access tokens this node accepts; empty: authorization off, anyone who reaches the endpoint may call it", stringSetter(func(c *Config) *string { return &c.Auth.Issuer })},
		{"auth-resource", "MCP_AUTH_RESOURCE", "", "canonical URI of the MCP endpoint as clients reach it (e.g. https://mcp.example.com/mcp): tokens must name it as audience (RFC 8707); required with --auth-issuer", stringSetter(func(c *Config) *string { return &c.Auth.Resource })},
		{"auth-scopes", "MCP_AUTH_SCOPES", "", "scopes every request needs (comma- or space-separated); a token without them gets 403 insufficient_scope", stringSetter(func(c *Config) *string { return &c.Auth.Scopes })},
		{"auth-jwks-url", "MCP_AUTH_JWKS_URL", "", "JWKS of the issuer; empty: found by RFC 8414 or OpenID Connect discovery", stringSetter(func(c *Config) *string { return &c.Auth.JWKSURL })},
		{"auth-introspection-url", "MCP_AUTH_INTROSPECTION_URL", "", "RFC 7662 introspection endpoint; empty: found by discovery (used with --auth-client-id)", stringSetter(func(c *Config) *string { return &c.Auth.IntrospectionURL })},
		{"auth-client-id", "MCP_AUTH_CLIENT_ID", "", "client id of this node at the authorization server; set: tokens are introspected instead of verified as JWTs", stringSetter(func(c *Config) *string { return &c.Auth.ClientID })},
		{"auth-tool-scopes", "MCP_AUTH_TOOL_SCOPES", "", "scopes individual tools need beyond --auth-scopes, as tool=scopes entries separated by ';' (e.g. 'echo=mcp:tools;add=mcp:tools mcp:math'); a caller without them does not see the tool, and calling it gets 403 insufficient_scope naming them (step-up); needs --auth-issuer", stringSetter(func(c *Config) *string { return &c.ToolScopes })},
		{"auth-client-secret", "MCP_AUTH_CLIENT_SECRET", "", "client secret for introspection (prefer the environment variable to the flag)", stringSetter(func(c *Config) *string { return &c.Auth.ClientSecret })},
		{"backend-retry-max", "MCP_BACKEND_RETRY_MAX", "5s", "longest wait between attempts to reach Redis at start-up (waits start at 100ms and double); the node answers 503 and /readyz fails until Redis answers", durationSetter(func(c *Config) *time.Duration { return &c.BackendRetryMax })},
		{"drain-delay", "MCP_DRAIN_DELAY", "0s", "on SIGTERM, how long /readyz fails while the node still serves everything, before it drains: time for load balancers to stop routing to it (set it to their health-check period times the failure threshold)", durationSetter(func(c *Config) *time.Duration { return &c.DrainDelay })},
		{"drain-timeout", "MCP_DRAIN_TIMEOUT", dur(st.DrainTimeout), "grace period for in-flight requests once the node drains (after --drain-delay), and over stdio at end of input", durationSetter(func(c *Config) *time.Duration { return &c.DrainTimeout })},
		{"log-level", "MCP_LOG_LEVEL", "info", "log level: debug, info, warn, error", stringSetter(func(c *Config) *string { return &c.LogLevel })},
		{"access-log", "MCP_ACCESS_LOG", "true", "log one line per HTTP request at info (method, MCP method, status, duration_ms, node, request id); 5xx answers are logged at warn either way", boolSetter(func(c *Config) *bool { return &c.AccessLog })},
		{"log-format", "MCP_LOG_FORMAT", "json", "log format: json or console", stringSetter(func(c *Config) *string { return &c.LogFormat })},
	}
}

// loadConfig reads defaults, then the environment, then flags.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var errs []error
	for _, s := range settings() {
		if err := s.set(c, s.def); err != nil {
			panic(fmt.Sprintf("default of --%s: %v", s.flag, err))
		}
		if v := getenv(s.env); v != "" {
			if err := s.set(c, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.env, err))
			}
		}
		set := func(v string) error { return s.set(c, v) }
		if s.boolean() {
			fs.BoolFunc(s.flag, s.help, set)
		} else {
			fs.Func(s.flag, s.help, set)
		}
	}
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, c.Validate()
}

// usage prints --help: the other modes, then every setting with its
// variable and default; booleans show no value.
func usage(w io.Writer) {
	fmt.Fprint(w, `Usage:
  server [flags]              run one mcpcluster node
  server --healthcheck URL    GET URL; exit 0 on a 2xx, else 1 (the container probe)
  server --version            print the version and exit

Every flag can also be set through its environment variable; a flag wins.
A boolean flag works bare (--stdio) or with a value (--stdio=false).

`)
	for _, s := range settings() {
		name, def := "--"+s.flag+" value", fmt.Sprintf("%q", s.def)
		if s.boolean() {
			name, def = "--"+s.flag, s.def
		}
		fmt.Fprintf(w, "  %s\n    \t%s\n    \t(env %s, default %s)\n", name, s.help, s.env, def)
	}
}

// Validate checks the configuration, each error naming the setting by
// its flag and variable, and reads the state keys. Every number and
// duration must be positive (--session-cache-ttl may be 0).
func (c *Config) Validate() error {
	var errs []error
	envOf := map[string]string{}
	for _, s := range settings() {
		envOf[s.flag] = s.env
	}
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s (%s): "+format, append([]any{name, envOf[name]}, args...)...))
	}
	if !c.Stdio && c.Addr == "" {
		bad("addr", "must not be empty")
	}
	if !c.Stdio && c.MetricsAddr != "" && c.MetricsAddr == c.Addr && !strings.HasSuffix(c.Addr, ":0") {
		bad("metrics-addr", "must differ from --addr (leave it empty to serve /metrics there)")
	}
	if c.Pprof && c.MetricsAddr == "" {
		bad("pprof", "needs --metrics-addr: the profiles are never served on the MCP endpoint's listener")
	}
	if !strings.HasPrefix(c.Path, "/") {
		bad("path", "must start with /: %q", c.Path)
	}
	if err := (&redisbackend.Options{ShardedPubSub: c.RedisSharded}).Validate(); err != nil {
		bad("redis-sharded-pubsub", "must be auto, on or off, not %q", c.RedisSharded)
	}
	if err := (&redisbackend.Options{Eviction: c.RedisEviction}).Validate(); err != nil {
		bad("redis-eviction", "must be unready, refuse or accept, not %q", c.RedisEviction)
	}
	c.validateRedis(bad)
	if c.Tools != "demo" && c.Tools != "conformance" {
		bad("tools", "must be demo or conformance, not %q", c.Tools)
	}
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			bad(name, "must be positive, not %s", d)
		}
	}
	pos("session-ttl", c.SessionTTL)
	pos("retry", c.RetryHint)
	pos("keepalive", c.KeepAlive)
	pos("history-ttl", c.HistoryTTL)
	pos("request-timeout", c.RequestTimeout)
	pos("resume-grace", c.ResumeGrace)
	pos("lease-ttl", c.LeaseTTL)
	pos("record-timeout", c.RecordTimeout)
	pos("record-retry", c.RecordRetry)
	pos("task-ttl", c.TaskTTL)
	pos("min-task-ttl", c.MinTaskTTL)
	pos("max-task-ttl", c.MaxTaskTTL)
	pos("task-poll-interval", c.TaskPoll)
	if c.MinTaskTTL > c.TaskTTL || c.TaskTTL > c.MaxTaskTTL {
		bad("task-ttl", "must lie within --min-task-ttl (%s) and --max-task-ttl (%s), not %s", c.MinTaskTTL, c.MaxTaskTTL, c.TaskTTL)
	}
	pos("drain-timeout", c.DrainTimeout)
	if c.DrainDelay < 0 {
		bad("drain-delay", "must not be negative, not %s", c.DrainDelay)
	}
	pos("backend-retry-max", c.BackendRetryMax)
	pos("body-read-timeout", c.BodyTimeout)
	pos("stream-write-timeout", c.WriteTimeout)
	pos("max-stream-lifetime", c.StreamLifetime)
	if c.SessionCache < 0 {
		bad("session-cache-ttl", "must not be negative, not %s", c.SessionCache)
	}
	for name, n := range map[string]int{"max-sessions": c.MaxSessions, "max-events": c.MaxEvents, "max-streams": c.MaxStreams, "max-waiters": c.MaxWaiters, "max-waiters-per-session": c.SessionWaiters, "max-subscriptions": c.MaxSubs, "max-client-info-bytes": c.MaxClientInfo, "max-capabilities-bytes": c.MaxCaps, "max-uri-bytes": c.MaxURI, "max-fanouts": c.MaxFanOuts, "page-size": c.PageSize,
		"max-handlers": c.MaxHandlers, "max-session-handlers": c.MaxSessionHdl, "max-batch": c.MaxBatch, "max-stream-backlog": c.StreamBacklog, "max-open-streams": c.MaxOpenStreams,
		"caller-max-sessions": c.CallerSessions, "caller-max-streams": c.CallerStreams, "caller-rate": c.CallerRate, "caller-burst": c.CallerBurst,
		"max-tasks-per-owner": c.MaxTasks, "max-task-result-bytes": c.MaxTaskResult, "task-cache-bytes": c.TaskCache, "task-attempts": c.TaskAttempts, "task-sweep-batch": c.TaskSweep, "max-skill-file-bytes": c.MaxSkillFile} {
		if n <= 0 {
			bad(name, "must be positive, not %d", n)
		}
	}
	if c.MaxBodyBytes < 1024 {
		bad("max-body-bytes", "must be at least 1024, not %d", c.MaxBodyBytes)
	}
	if c.MaxInflight < c.MaxBodyBytes {
		bad("max-inflight-bytes", "must be at least --max-body-bytes (%d), not %d", c.MaxBodyBytes, c.MaxInflight)
	}
	if err := (&mcp.HTTPOptions{TrustedProxies: splitList(c.TrustedProxies)}).Validate(); err != nil {
		bad("trusted-proxies", "%v", err)
	}
	if c.MaxSessionHdl > c.MaxHandlers {
		bad("max-session-handlers", "must not exceed --max-handlers (%d), not %d", c.MaxHandlers, c.MaxSessionHdl)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "must be debug, info, warn or error, not %q", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		bad("log-format", "must be json or console, not %q", c.LogFormat)
	}
	if c.Auth != (auth.Config{}) {
		if c.Stdio {
			bad("auth-issuer", "applies to HTTP only; stdio takes its credentials from the environment")
		} else if _, _, err := c.Auth.New(nil); err != nil {
			bad("auth-issuer", "%v", err)
		}
	}
	if c.ToolScopes != "" {
		if _, err := parseToolScopes(c.ToolScopes); err != nil {
			bad("auth-tool-scopes", "%v", err)
		} else if !c.Auth.Enabled() {
			bad("auth-tool-scopes", "needs --auth-issuer: without authorization no caller has scopes, and the tools would be hidden from all")
		}
	}
	c.stateKeys = nil
	switch keys, name, err := c.readStateKeys(); {
	case err != nil:
		bad(name, "%v", err)
	case keys == nil && c.RedisURL != "" && !c.Stdio:
		bad("state-key", "a node with a Redis URL needs the key every node of the cluster shares; "+
			"set MCP_STATE_KEY or --state-key-file (32 random bytes, e.g. head -c32 /dev/urandom | od -An -tx1 | tr -d ' \\n')")
	default:
		c.stateKeys = keys
	}
	return errors.Join(errs...)
}

// readStateKeys parses the state keys from --state-key or from the file
// --state-key-file names; on error it also names the setting at fault.
// Errors never echo a key.
func (c *Config) readStateKeys() (keys [][]byte, name string, err error) {
	text, name := c.StateKey, "state-key"
	switch {
	case c.StateKeyFile != "" && c.StateKey != "":
		return nil, name, errors.New("set either --state-key or --state-key-file, not both")
	case c.StateKeyFile != "":
		name = "state-key-file"
		b, err := os.ReadFile(c.StateKeyFile)
		if err != nil {
			return nil, name, err
		}
		if text = strings.TrimSpace(string(b)); text == "" {
			return nil, name, fmt.Errorf("%s is empty", c.StateKeyFile)
		}
	}
	if text == "" {
		return nil, name, nil
	}
	for i, k := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' }) {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		b, err := seal.ParseKey(k)
		if err != nil {
			return nil, name, fmt.Errorf("key %d: %w", i+1, err)
		}
		keys = append(keys, b)
	}
	if keys == nil {
		return nil, name, errors.New("no key given")
	}
	return keys, name, nil
}

// serverOptions are the mcp.ServerOptions the settings give; the caller
// adds the instructions, state keys and logger.
func (c *Config) serverOptions() mcp.ServerOptions {
	return mcp.ServerOptions{
		PageSize:             c.PageSize,
		RequestTimeout:       c.RequestTimeout,
		MaxClientInfoBytes:   c.MaxClientInfo,
		MaxCapabilitiesBytes: c.MaxCaps,
		MaxURIBytes:          c.MaxURI,
		MaxSubscriptions:     c.MaxSubs,
		MaxSkillFileBytes:    c.MaxSkillFile,
	}
}

// httpOptions are the mcp.HTTPOptions the settings give; the caller adds
// the backend and the logger.
func (c *Config) httpOptions() mcp.HTTPOptions {
	return mcp.HTTPOptions{
		NodeID:               c.NodeID,
		SessionTTL:           c.SessionTTL,
		MaxSessions:          c.MaxSessions,
		MaxBodyBytes:         c.MaxBodyBytes,
		RetryHint:            c.RetryHint,
		KeepAlive:            c.KeepAlive,
		MaxEvents:            c.MaxEvents,
		MaxStreams:           c.MaxStreams,
		HistoryTTL:           c.HistoryTTL,
		MaxWaiters:           c.MaxWaiters,
		MaxWaitersPerSession: c.SessionWaiters,
		MaxFanOuts:           c.MaxFanOuts,
		ResumeGrace:          c.ResumeGrace,
		LeaseTTL:             c.LeaseTTL,
		RecordTimeout:        c.RecordTimeout,
		RecordRetry:          c.RecordRetry,
		TaskTTL:              c.TaskTTL,
		MinTaskTTL:           c.MinTaskTTL,
		MaxTaskTTL:           c.MaxTaskTTL,
		TaskPollInterval:     c.TaskPoll,
		MaxTasksPerOwner:     c.MaxTasks,
		MaxTaskResultBytes:   c.MaxTaskResult,
		TaskCacheBytes:       c.TaskCache,
		TaskAttempts:         c.TaskAttempts,
		TaskSweepBatch:       c.TaskSweep,
		SessionCacheTTL:      c.SessionCache,
		NoSessionCache:       c.SessionCache == 0,
		MaxHandlers:          c.MaxHandlers,
		MaxSessionHandlers:   c.MaxSessionHdl,
		MaxBatch:             c.MaxBatch,
		MaxStreamBacklog:     c.StreamBacklog,
		MaxInflightBytes:     c.MaxInflight,
		BodyReadTimeout:      c.BodyTimeout,
		MaxOpenStreams:       c.MaxOpenStreams,
		StreamWriteTimeout:   c.WriteTimeout,
		MaxStreamLifetime:    c.StreamLifetime,
		AllowedOrigins:       splitList(c.AllowedOrigins),
		AllowedHosts:         splitList(c.AllowedHosts),
		AllowLoopbackOrigins: isLoopback(c.Addr),
		MaxCallerSessions:    c.CallerSessions,
		MaxCallerStreams:     c.CallerStreams,
		CallerRate:           c.CallerRate,
		CallerBurst:          c.CallerBurst,
		TrustedProxies:       splitList(c.TrustedProxies),
		NoCallerLimits:       c.CallerLimitsOff,
		NoAccessLog:          !c.AccessLog,
	}
}

// stdioOptions are the mcp.StdioOptions the settings give.
func (c *Config) stdioOptions() mcp.StdioOptions {
	return mcp.StdioOptions{DrainTimeout: c.DrainTimeout, MaxBatch: c.MaxBatch, MaxHandlers: c.MaxSessionHdl}
}

// env returns os.Getenv; a seam for tests.
var env = os.Getenv
