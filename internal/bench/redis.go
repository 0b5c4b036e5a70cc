package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RedisProbe is a minimal RESP2 client for reading a Redis server's
// statistics: INFO sections and MONITOR. It is what a benchmark needs to
// count the work a run caused in Redis without depending on a Redis
// library. A RedisProbe is not safe for concurrent use.
type RedisProbe struct {
	conn net.Conn
	rd   *bufio.Reader
}

// DialRedis connects to a redis:// URL (host, port, optional user and
// password, optional /db) or a unix:// socket path.
func DialRedis(ctx context.Context, rawURL string) (*RedisProbe, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	var d net.Dialer
	var conn net.Conn
	switch u.Scheme {
	case "redis":
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "6379")
		}
		conn, err = d.DialContext(ctx, "tcp", host)
	case "unix":
		conn, err = d.DialContext(ctx, "unix", u.Path)
	default:
		return nil, fmt.Errorf("redis url: scheme %q is not redis:// or unix://", u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	p := &RedisProbe{conn: conn, rd: bufio.NewReader(conn)}
	if u.User != nil {
		args := []string{"AUTH"}
		if pass, ok := u.User.Password(); ok {
			if name := u.User.Username(); name != "" {
				args = append(args, name)
			}
			args = append(args, pass)
		} else {
			args = append(args, u.User.Username()) // redis://password@host
		}
		if _, err := p.Do(ctx, args...); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if db := strings.Trim(u.Path, "/"); u.Scheme == "redis" && db != "" && db != "0" {
		if _, err := p.Do(ctx, "SELECT", db); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return p, nil
}

// Close closes the connection.
func (p *RedisProbe) Close() error { return p.conn.Close() }

// Do sends one command and returns its reply: string for simple and bulk
// strings, int64 for integers, []any for arrays, nil for a null reply.
// An error reply is returned as an error.
func (p *RedisProbe) Do(ctx context.Context, args ...string) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = p.conn.SetDeadline(dl)
	} else {
		_ = p.conn.SetDeadline(time.Now().Add(10 * time.Second))
	}
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	if _, err := p.conn.Write(b); err != nil {
		return nil, err
	}
	return readReply(p.rd)
}

// readReply parses one RESP2 reply.
func readReply(rd *bufio.Reader) (any, error) {
	line, err := readLine(rd)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("redis: empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New("redis: " + line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("redis: bad bulk length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, fmt.Errorf("redis: bad array length %q", line)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(rd); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}

func readLine(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
}

// Info returns the fields of one INFO section as a map.
func (p *RedisProbe) Info(ctx context.Context, section string) (map[string]string, error) {
	r, err := p.Do(ctx, "INFO", section)
	if err != nil {
		return nil, err
	}
	s, _ := r.(string)
	return ParseInfo(s), nil
}

// ParseInfo parses INFO output: "name:value" lines; comments and blank
// lines are skipped.
func ParseInfo(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// CommandStats returns the number of calls of every command since the
// server started (INFO commandstats), keyed by lower-case command name
// ("evalsha", "client|setinfo"). Redis counts commands run inside Lua
// scripts too, so these are commands executed, not round trips.
func (p *RedisProbe) CommandStats(ctx context.Context) (map[string]int64, error) {
	info, err := p.Info(ctx, "commandstats")
	if err != nil {
		return nil, err
	}
	return ParseCommandStats(info), nil
}

// ReadsProcessed returns the read events the server processed since it
// started (INFO stats total_reads_processed, Redis 6 and newer): one per
// request as it arrives, however many commands a pipeline carries (one
// larger than the server's 16 KiB read buffer takes more). The read of
// this INFO call itself is counted.
func (p *RedisProbe) ReadsProcessed(ctx context.Context) (int64, error) {
	info, err := p.Info(ctx, "stats")
	if err != nil {
		return 0, err
	}
	v, ok := info["total_reads_processed"]
	if !ok {
		return 0, errors.New("INFO stats has no total_reads_processed (Redis older than 6.0)")
	}
	return strconv.ParseInt(v, 10, 64)
}

// ParseCommandStats reads the calls= of each cmdstat_ field.
func ParseCommandStats(info map[string]string) map[string]int64 {
	costs := ParseCommandCosts(info)
	out := make(map[string]int64, len(costs))
	for name, c := range costs {
		out[name] = c.Calls
	}
	return out
}

// CommandCost is what INFO commandstats says of one command: the calls
// since the server started (or CONFIG RESETSTAT) and the microseconds
// they took in all.
type CommandCost struct {
	Calls, Usec int64
}

// ParseCommandCosts reads calls= and usec= of each cmdstat_ field
// (cmdstat_evalsha:calls=3,usec=12,...), by the command's name in lower
// case; a field whose calls= does not parse is left out.
func ParseCommandCosts(info map[string]string) map[string]CommandCost {
	out := map[string]CommandCost{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var c CommandCost
		calls := false
		for part := range strings.SplitSeq(v, ",") {
			key, val, _ := strings.Cut(part, "=")
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				continue
			}
			switch key {
			case "calls":
				c.Calls, calls = n, true
			case "usec":
				c.Usec = n
			}
		}
		if calls {
			out[strings.ToLower(name)] = c
		}
	}
	return out
}

// WaitRedis waits until the Redis at rawURL answers PING, trying every
// 50 ms until ctx ends; then it returns the last failure.
func WaitRedis(ctx context.Context, rawURL string) error {
	for {
		p, err := DialRedis(ctx, rawURL)
		if err == nil {
			_, err = p.Do(ctx, "PING")
			p.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ConnectedClients returns INFO clients' connected_clients (this probe's
// own connection included).
func (p *RedisProbe) ConnectedClients(ctx context.Context) (int, error) {
	info, err := p.Info(ctx, "clients")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(info["connected_clients"])
}

// probeCommands are commands a RedisProbe itself sends; deltas drop them.
var probeCommands = map[string]bool{"info": true, "monitor": true, "auth": true, "select": true}

// CommandDelta returns after − before per command, leaving out commands
// that did not change and the probe's own commands.
func CommandDelta(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, a := range after {
		if probeCommands[k] {
			continue
		}
		if d := a - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Monitor counts the commands clients send to a Redis server, through the
// MONITOR command on a connection of its own. Unlike INFO commandstats it
// tells commands a client sent (one round trip each, unless pipelined)
// from commands a Lua script ran on the server, which MONITOR shows with
// the client "lua". MONITOR slows Redis down noticeably: use it in short,
// dedicated runs.
type Monitor struct {
	conn net.Conn
	done chan struct{}

	mu       sync.Mutex
	counting bool
	client   map[string]int64 // sent by clients
	script   map[string]int64 // run inside scripts
	err      error
}

// StartMonitor connects to rawURL and starts MONITOR. Counting starts at
// Begin and stops at End; Close ends the connection.
func StartMonitor(ctx context.Context, rawURL string) (*Monitor, error) {
	p, err := DialRedis(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	r, err := p.Do(ctx, "MONITOR")
	if err != nil {
		p.Close()
		return nil, err
	}
	if r != "OK" {
		p.Close()
		return nil, fmt.Errorf("redis: MONITOR answered %v", r)
	}
	_ = p.conn.SetDeadline(time.Time{})
	m := &Monitor{conn: p.conn, done: make(chan struct{}), client: map[string]int64{}, script: map[string]int64{}}
	go m.read(p.rd)
	return m, nil
}

func (m *Monitor) read(rd *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := readLine(rd)
		if err != nil {
			m.mu.Lock()
			if m.err == nil && !errors.Is(err, net.ErrClosed) {
				m.err = err
			}
			m.mu.Unlock()
			return
		}
		src, cmd, ok := ParseMonitorLine(line)
		if !ok {
			continue
		}
		m.mu.Lock()
		if m.counting {
			if src == "lua" {
				m.script[cmd]++
			} else {
				m.client[cmd]++
			}
		}
		m.mu.Unlock()
	}
}

// ParseMonitorLine parses one MONITOR line,
//
//	+1700000000.123456 [0 127.0.0.1:53422] "evalsha" "abc" "1"
//
// into the client ("127.0.0.1:53422", or "lua" for a command a script
// ran) and the lower-case command name.
func ParseMonitorLine(line string) (client, command string, ok bool) {
	line = strings.TrimPrefix(line, "+")
	open := strings.IndexByte(line, '[')
	closing := strings.IndexByte(line, ']')
	if open < 0 || closing < open {
		return "", "", false
	}
	inside := strings.Fields(line[open+1 : closing])
	if len(inside) < 2 {
		return "", "", false
	}
	rest := strings.TrimSpace(line[closing+1:])
	if !strings.HasPrefix(rest, `"`) {
		return "", "", false
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return "", "", false
	}
	return inside[1], strings.ToLower(rest[1 : end+1]), true
}

// Begin starts counting (again, from zero).
func (m *Monitor) Begin() {
	m.mu.Lock()
	m.counting = true
	m.client = map[string]int64{}
	m.script = map[string]int64{}
	m.mu.Unlock()
}

// End stops counting and returns the commands clients sent and the
// commands scripts ran since Begin. MONITOR output trails the commands
// slightly; End waits for settle so that the commands of the last
// operations are seen.
func (m *Monitor) End(settle time.Duration) (client, script map[string]int64, err error) {
	time.Sleep(settle)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counting = false
	return m.client, m.script, m.err
}

// Close ends the MONITOR connection.
func (m *Monitor) Close() error {
	err := m.conn.Close()
	<-m.done
	return err
}

// RedisStats is what a run cost in Redis, per operation of the run.
type RedisStats struct {
	// Ops is the number of operations the counts are divided by (for
	// the idle scenario: stream-seconds, see Unit).
	Ops float64 `json:"ops"`
	// Unit names what Ops counts: "op", or "stream-second" for runs
	// that hold idle streams.
	Unit string `json:"unit"`
	// Commands is commands executed per operation (INFO commandstats,
	// commands run by scripts included), by command.
	Commands map[string]float64 `json:"commands_per_op"`
	// CommandsPerOp is the sum of Commands.
	CommandsPerOp float64 `json:"total_commands_per_op"`
	// RoundTrips is commands sent by clients per operation (MONITOR), by
	// command; nil when the run did not monitor.
	RoundTrips map[string]float64 `json:"round_trips_by_command,omitempty"`
	// RoundTripsPerOp is the sum of RoundTrips (0 when not monitored).
	RoundTripsPerOp float64 `json:"round_trips_per_op,omitempty"`
	// ReadsPerOp is the requests the servers read per operation (INFO
	// stats total_reads_processed, the probe's own excluded): a round trip
	// as Redis sees it, one however many commands a pipeline carries; 0
	// when the servers do not count them.
	ReadsPerOp float64 `json:"reads_per_op,omitempty"`
	// ScriptCommands is commands run inside scripts per operation
	// (MONITOR), by command.
	ScriptCommands map[string]float64 `json:"script_commands,omitempty"`
	// ClientsBefore and ClientsAfter are connected_clients at the start
	// and end of the measured window (the probe's connection included).
	ClientsBefore int `json:"clients_before"`
	ClientsAfter  int `json:"clients_after"`
	// Shards is each primary's part when the servers' state is a Redis
	// Cluster (the fields above are then sums over the primaries); nil
	// for one server.
	Shards []ShardStats `json:"shards,omitempty"`
}

// ShardStats is one Redis Cluster primary's part of a run, per operation.
type ShardStats struct {
	// Addr is the primary's host:port as the cluster lists it.
	Addr string `json:"addr"`
	// CommandsPerOp is the commands it executed (INFO commandstats).
	CommandsPerOp float64 `json:"commands_per_op"`
	// PublishPerOp and SPublishPerOp are the PUBLISH and SPUBLISH
	// commands clients sent to it.
	PublishPerOp  float64 `json:"publish_per_op"`
	SPublishPerOp float64 `json:"spublish_per_op"`
	// BusPublishPerOp is the publish messages it received from the other
	// primaries over the cluster bus (CLUSTER INFO's
	// cluster_stats_messages_publish_received plus
	// cluster_stats_messages_publishshard_received): each PUBLISH is
	// relayed to every node of the cluster, an SPUBLISH only to the
	// replicas of its shard.
	BusPublishPerOp float64 `json:"bus_publish_received_per_op"`
}

// PerOp divides counts by ops.
func PerOp(counts map[string]int64, ops float64) (map[string]float64, float64) {
	out := map[string]float64{}
	var sum float64
	if ops <= 0 {
		return out, 0
	}
	for k, c := range counts {
		v := float64(c) / ops
		out[k] = v
		sum += v
	}
	return out, sum
}
