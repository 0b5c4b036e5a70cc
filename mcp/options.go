package mcp

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/coordinator"
	"github.com/mcpcluster/mcpcluster/internal/stdio"
)

// This file is the one place the defaults of the options live: a zero
// field takes the value the Default*Options function gives it, and
// cmd/server's settings table takes its defaults from the same
// functions. A negative number or duration is an error (Validate), never
// a silent default.

// DefaultHTTPOptions returns HTTPOptions with every bound at its
// documented default: the values zero fields take. Backend, NodeID,
// Logger and the allow lists have none.
func DefaultHTTPOptions() HTTPOptions {
	// The node's settings are the node's defaults.
	n, t := coordinator.Config{}.WithDefaults(), coordinator.TaskOptions{}.WithDefaults()
	return HTTPOptions{
		SessionTTL:           n.SessionTTL,
		SessionCacheTTL:      30 * time.Second,
		MaxSessions:          10000,
		MaxBodyBytes:         4 << 20,
		RetryHint:            time.Second,
		KeepAlive:            15 * time.Second,
		MaxEvents:            n.MaxEvents,
		MaxStreams:           n.MaxStreams,
		HistoryTTL:           n.HistoryTTL,
		MaxWaiters:           n.MaxWaiters,
		MaxWaitersPerSession: n.MaxWaitersPerSession,
		ResumeGrace:          10 * time.Second,
		LeaseTTL:             n.LeaseTTL,
		MaxFanOuts:           n.MaxFanOuts,
		MaxHandlers:          1024,
		MaxSessionHandlers:   64,
		MaxBatch:             64,
		MaxStreamBacklog:     1024,
		MaxInflightBytes:     64 << 20,
		BodyReadTimeout:      30 * time.Second,
		MaxOpenStreams:       5000,
		StreamWriteTimeout:   30 * time.Second,
		MaxStreamLifetime:    time.Hour,
		RecordTimeout:        n.RecordTimeout,
		RecordRetry:          n.RecordRetry,
		MaxCallerSessions:    1000,
		MaxCallerStreams:     1000,
		CallerRate:           1000,
		CallerBurst:          2000,
		TaskTTL:              time.Hour,
		MinTaskTTL:           time.Second,
		MaxTaskTTL:           24 * time.Hour,
		TaskPollInterval:     500 * time.Millisecond,
		MaxTasksPerOwner:     t.MaxPerOwner,
		MaxTaskResultBytes:   t.MaxResultBytes,
		TaskCacheBytes:       t.CacheBytes,
		TaskAttempts:         t.MaxAttempts,
		TaskSweepBatch:       t.SweepBatch,
	}
}

// DefaultServerOptions returns ServerOptions with every bound at its
// documented default. ListTTL (0: stale at once) and the other fields
// have none.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		PageSize:             100,
		RequestTimeout:       60 * time.Second,
		StateTTL:             10 * time.Minute,
		MaxClientInfoBytes:   4096,
		MaxCapabilitiesBytes: 16384,
		MaxURIBytes:          2048,
		MaxSubscriptions:     DefaultMaxSubscriptions,
		MaxSkillFileBytes:    4 << 20,
	}
}

// DefaultStdioOptions returns StdioOptions at their documented defaults.
func DefaultStdioOptions() StdioOptions {
	h := DefaultHTTPOptions()
	return StdioOptions{MaxLineBytes: stdio.DefaultMaxLineBytes, DrainTimeout: 20 * time.Second,
		MaxBatch: h.MaxBatch, MaxHandlers: h.MaxSessionHandlers}
}

// Validate reports every negative number or duration of o, each error
// naming its field. NewHTTPHandler calls it.
func (o *HTTPOptions) Validate() error {
	err := notNegative("HTTPOptions", o)
	if o == nil {
		return err
	}
	if _, perr := parseTrustedProxies(o.TrustedProxies); perr != nil {
		err = errors.Join(err, fmt.Errorf("mcp: HTTPOptions.TrustedProxies: %w", perr))
	}
	return err
}

// Validate reports every negative number or duration of o, each error
// naming its field. The transports (NewHTTPHandler, ServeStdio) call it.
func (o *ServerOptions) Validate() error { return notNegative("ServerOptions", o) }

// Validate reports every negative number or duration of o, each error
// naming its field. ServeStdio calls it.
func (o *StdioOptions) Validate() error { return notNegative("StdioOptions", o) }

// Validate reports a negative MaxSubscriptions.
func (o *MemoryOptions) Validate() error { return notNegative("MemoryOptions", o) }

func notNegative(name string, opts any) error {
	v := reflect.ValueOf(opts)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	var errs []error
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if f.Int() < 0 {
				errs = append(errs, fmt.Errorf("mcp: %s.%s: must not be negative, not %v", name, v.Type().Field(i).Name, f.Interface()))
			}
		}
	}
	return errors.Join(errs...)
}

// orDefault is v, or def when v is zero.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func (o *HTTPOptions) defaults() {
	d := DefaultHTTPOptions()
	o.SessionTTL = orDefault(o.SessionTTL, d.SessionTTL)
	o.SessionCacheTTL = orDefault(o.SessionCacheTTL, d.SessionCacheTTL)
	if o.NoSessionCache {
		o.SessionCacheTTL = 0
	}
	o.MaxSessions = orDefault(o.MaxSessions, d.MaxSessions)
	o.MaxBodyBytes = orDefault(o.MaxBodyBytes, d.MaxBodyBytes)
	o.RetryHint = orDefault(o.RetryHint, d.RetryHint)
	o.KeepAlive = orDefault(o.KeepAlive, d.KeepAlive)
	o.MaxEvents = orDefault(o.MaxEvents, d.MaxEvents)
	o.MaxStreams = orDefault(o.MaxStreams, d.MaxStreams)
	o.HistoryTTL = orDefault(o.HistoryTTL, d.HistoryTTL)
	o.MaxWaiters = orDefault(o.MaxWaiters, d.MaxWaiters)
	o.MaxWaitersPerSession = orDefault(o.MaxWaitersPerSession, d.MaxWaitersPerSession)
	o.ResumeGrace = orDefault(o.ResumeGrace, d.ResumeGrace)
	o.LeaseTTL = orDefault(o.LeaseTTL, d.LeaseTTL)
	o.MaxFanOuts = orDefault(o.MaxFanOuts, d.MaxFanOuts)
	o.MaxHandlers = orDefault(o.MaxHandlers, d.MaxHandlers)
	o.MaxSessionHandlers = orDefault(o.MaxSessionHandlers, d.MaxSessionHandlers)
	o.MaxBatch = orDefault(o.MaxBatch, d.MaxBatch)
	o.MaxStreamBacklog = orDefault(o.MaxStreamBacklog, d.MaxStreamBacklog)
	o.MaxInflightBytes = orDefault(o.MaxInflightBytes, d.MaxInflightBytes)
	o.BodyReadTimeout = orDefault(o.BodyReadTimeout, d.BodyReadTimeout)
	o.MaxOpenStreams = orDefault(o.MaxOpenStreams, d.MaxOpenStreams)
	o.StreamWriteTimeout = orDefault(o.StreamWriteTimeout, d.StreamWriteTimeout)
	o.MaxStreamLifetime = orDefault(o.MaxStreamLifetime, d.MaxStreamLifetime)
	o.RecordTimeout = orDefault(o.RecordTimeout, d.RecordTimeout)
	o.RecordRetry = orDefault(o.RecordRetry, d.RecordRetry)
	o.MaxCallerSessions = orDefault(o.MaxCallerSessions, d.MaxCallerSessions)
	o.MaxCallerStreams = orDefault(o.MaxCallerStreams, d.MaxCallerStreams)
	o.CallerRate = orDefault(o.CallerRate, d.CallerRate)
	o.CallerBurst = orDefault(o.CallerBurst, d.CallerBurst)
	o.TaskTTL = orDefault(o.TaskTTL, d.TaskTTL)
	o.MinTaskTTL = orDefault(o.MinTaskTTL, d.MinTaskTTL)
	o.MaxTaskTTL = orDefault(o.MaxTaskTTL, d.MaxTaskTTL)
	o.TaskPollInterval = orDefault(o.TaskPollInterval, d.TaskPollInterval)
	o.MaxTasksPerOwner = orDefault(o.MaxTasksPerOwner, d.MaxTasksPerOwner)
	o.MaxTaskResultBytes = orDefault(o.MaxTaskResultBytes, d.MaxTaskResultBytes)
	o.TaskCacheBytes = orDefault(o.TaskCacheBytes, d.TaskCacheBytes)
	o.TaskAttempts = orDefault(o.TaskAttempts, d.TaskAttempts)
	o.TaskSweepBatch = orDefault(o.TaskSweepBatch, d.TaskSweepBatch)
	o.MaxTaskTTL = max(o.MaxTaskTTL, o.TaskTTL)
	o.MinTaskTTL = min(o.MinTaskTTL, o.TaskTTL)
	o.MaxInflightBytes = max(o.MaxInflightBytes, o.MaxBodyBytes)
	o.MaxSessionHandlers = min(o.MaxSessionHandlers, o.MaxHandlers)
	o.MaxCallerSessions = min(o.MaxCallerSessions, max(1, o.MaxSessions/2))
	if o.NodeID == "" {
		o.NodeID = randomToken(6)
	}
}

func (o *ServerOptions) pageSize() int { return orDefault(o.PageSize, DefaultServerOptions().PageSize) }

func (o *ServerOptions) requestTimeout() time.Duration {
	return orDefault(o.RequestTimeout, DefaultServerOptions().RequestTimeout)
}

func (o *ServerOptions) stateTTL() time.Duration {
	return orDefault(o.StateTTL, DefaultServerOptions().StateTTL)
}

func (o *ServerOptions) maxClientInfoBytes() int {
	return orDefault(o.MaxClientInfoBytes, DefaultServerOptions().MaxClientInfoBytes)
}

func (o *ServerOptions) maxCapabilitiesBytes() int {
	return orDefault(o.MaxCapabilitiesBytes, DefaultServerOptions().MaxCapabilitiesBytes)
}

func (o *ServerOptions) maxURIBytes() int {
	return orDefault(o.MaxURIBytes, DefaultServerOptions().MaxURIBytes)
}

func (o *ServerOptions) maxSubscriptions() int {
	return orDefault(o.MaxSubscriptions, DefaultServerOptions().MaxSubscriptions)
}
