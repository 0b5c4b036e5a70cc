package main

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterredis "github.com/mcpcluster/mcpcluster/internal/cluster/redis"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// optionSet is every option value the settings feed, for comparison.
type optionSet struct {
	HTTP             mcp.HTTPOptions
	Server           mcp.ServerOptions
	Stdio            mcp.StdioOptions
	MaxSubscriptions int
	Redis            clusterredis.ConnOptions
	Wait             waitOptions
}

// waitOptions are the backend's options that wait for replicas and
// share round trips.
type waitOptions struct {
	Replicas  int
	Timeout   time.Duration
	Pipelines int
	Calls     int
	Eviction  time.Duration // how often the memory policy is read
	Linger    time.Duration
}

func optionsOf(c *Config) optionSet {
	b := c.backendOptions()
	return optionSet{HTTP: c.httpOptions(), Server: c.serverOptions(), Stdio: c.stdioOptions(), MaxSubscriptions: c.MaxSubs, Redis: c.redisConn(),
		Wait: waitOptions{b.WaitReplicas, b.WaitTimeout, b.Pipelines, b.MaxPipelineCalls, b.EvictionCheck, b.AppendLinger}}
}

// documented is the option values the mcp package documents as defaults.
func documented() optionSet {
	return optionSet{HTTP: mcp.DefaultHTTPOptions(), Server: mcp.DefaultServerOptions(), Stdio: mcp.DefaultStdioOptions(), MaxSubscriptions: mcp.DefaultMaxSubscriptions,
		Redis: clusterredis.DefaultConnOptions(), Wait: waitOptions{0, clusterredis.DefaultWaitTimeout, clusterredis.DefaultPipelines, clusterredis.DefaultMaxPipelineCalls, clusterredis.DefaultEvictionCheck, 0}}
}

// numericFields lists the int and duration fields of v (a struct, walked
// into nested structs) by path, with their values.
func numericFields(prefix string, v reflect.Value, out map[string]int64) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			numericFields(prefix+"."+v.Type().Field(i).Name, v.Field(i), out)
		}
	case reflect.Int, reflect.Int64:
		out[strings.TrimPrefix(prefix, ".")] = v.Int()
	}
}

func numeric(o optionSet) map[string]int64 {
	out := map[string]int64{}
	numericFields("", reflect.ValueOf(o), out)
	return out
}

// cmdOnly are the numeric settings of cmd/server itself, which no mcp
// option carries; unset are the options no setting feeds (the node runs
// on their defaults); shared are the settings that feed several option
// fields on purpose (one bound over HTTP and stdio, or in the backend
// and the server), with how many.
var (
	cmdOnly = map[string]bool{"backend-retry-max": true, "drain-delay": true}
	unset   = map[string]bool{"Server.StateTTL": true, "Stdio.MaxLineBytes": true}
	shared  = map[string]int{"max-batch": 2, "max-session-handlers": 2, "max-subscriptions": 2}
)

// Each numeric setting is walked: changed alone, it must change exactly
// one option field, and its default must be that field's documented
// default. Every numeric option with a documented default must be
// reached by some setting.
func TestSettingDefaultsAreTheOptionsDocumentedDefaults(t *testing.T) {
	base, err := loadConfig(nil, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	baseVals, docVals := numeric(optionsOf(base)), numeric(documented())
	reached := map[string]string{}
	for _, s := range settings() {
		// An integer first: "0" parses as a duration too.
		var other string
		if n, err := strconv.ParseInt(s.def, 10, 64); err == nil {
			other = strconv.FormatInt(2*n+1, 10)
		} else if d, err := time.ParseDuration(s.def); err == nil {
			other = (2*d + time.Second).String()
		} else {
			continue // not a number or duration
		}
		c := *base
		if err := s.set(&c, other); err != nil {
			t.Fatalf("--%s %s: %v", s.flag, other, err)
		}
		var changed []string
		for path, v := range numeric(optionsOf(&c)) {
			if v != baseVals[path] {
				changed = append(changed, path)
			}
		}
		if cmdOnly[s.flag] {
			if len(changed) != 0 {
				t.Errorf("--%s is listed as cmd/server's own but feeds %v", s.flag, changed)
			}
			continue
		}
		if want := max(shared[s.flag], 1); len(changed) != want {
			t.Errorf("--%s feeds %v, want exactly %d option field(s)", s.flag, changed, want)
			continue
		}
		for _, path := range changed {
			reached[path] = s.flag
			if baseVals[path] != docVals[path] {
				t.Errorf("--%s defaults to %s, but %s documents %v", s.flag, s.def, path, fmtVal(path, docVals[path]))
			}
		}
	}
	for path, v := range docVals {
		if _, ok := reached[path]; !ok && v != 0 && !unset[path] {
			t.Errorf("option %s has a documented default (%v) but no setting feeds it", path, fmtVal(path, v))
		}
	}
	if len(reached) < 25 {
		t.Errorf("only %d settings reached an option; the walk is broken", len(reached))
	}
}

func fmtVal(path string, v int64) string {
	if d := time.Duration(v); strings.Contains(path, "TTL") || strings.Contains(path, "Timeout") || strings.Contains(path, "Grace") || strings.Contains(path, "Hint") || strings.Contains(path, "KeepAlive") {
		return d.String()
	}
	return fmt.Sprint(v)
}

// Every numeric or duration setting rejects a negative value, from a
// flag and from its variable, with an error naming both.
func TestNegativeSettingsAreErrors(t *testing.T) {
	n := 0
	for _, s := range settings() {
		var neg string
		if _, err := strconv.ParseInt(s.def, 10, 64); err == nil {
			neg = "-1"
		} else if _, err := time.ParseDuration(s.def); err == nil {
			neg = "-1s"
		} else {
			continue
		}
		n++
		want := fmt.Sprintf("--%s (%s): ", s.flag, s.env)
		for _, from := range []string{"flag", "env"} {
			args, getenv := []string{"--" + s.flag + "=" + neg}, func(string) string { return "" }
			if from == "env" {
				args, getenv = nil, func(k string) string {
					if k == s.env {
						return neg
					}
					return ""
				}
			}
			_, err := loadConfig(args, getenv, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %s=%s: got %v, want an error starting %q", from, s.flag, neg, err, want)
			}
		}
	}
	if n < 25 {
		t.Fatalf("only %d numeric settings found; the walk is broken", n)
	}
}
