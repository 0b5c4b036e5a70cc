package redis

// Helpers of the compatibility tests (compat_test.go): a Redis database
// dumped key by key, restored into another server with its times moved
// to that server's clock, and compared with another dump once the values
// that differ from run to run (times, call tokens) are normalised.

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// keyDump is one Redis key as a compatibility test records it: its
// type, its TTL (whole seconds; -1 without one) and its contents.
type keyDump struct {
	Key  string            `json:"key"`
	Type string            `json:"type"`
	TTL  int64             `json:"ttl_s"`
	Str  *string           `json:"string,omitempty"`
	Hash map[string]string `json:"hash,omitempty"`
	List []string          `json:"list,omitempty"`
	Set  []string          `json:"set,omitempty"`
	ZSet [][2]string       `json:"zset,omitempty"`
}

// stateDump is every key of a Redis database at a moment (NowMS, the
// server's clock): times in it are read relative to that moment.
type stateDump struct {
	NowMS int64     `json:"now_ms"`
	Keys  []keyDump `json:"keys"`
}

// dumpState reads every key of c's database.
func dumpState(ctx context.Context, t testing.TB, c *goredis.Client) stateDump {
	t.Helper()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	d := stateDump{NowMS: now.UnixMilli()}
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		kd := keyDump{Key: k, Type: typ, TTL: -1}
		if pttl, err := c.PTTL(ctx, k).Result(); err == nil && pttl > 0 {
			kd.TTL = int64(math.Round(pttl.Seconds()))
		}
		switch typ {
		case "string":
			s := c.Get(ctx, k).Val()
			kd.Str = &s
		case "hash":
			kd.Hash = c.HGetAll(ctx, k).Val()
		case "list":
			kd.List = c.LRange(ctx, k, 0, -1).Val()
		case "set":
			kd.Set = c.SMembers(ctx, k).Val()
			slices.Sort(kd.Set)
		case "zset":
			for _, z := range c.ZRangeWithScores(ctx, k, 0, -1).Val() {
				kd.ZSet = append(kd.ZSet, [2]string{z.Member.(string), strconv.FormatFloat(z.Score, 'f', -1, 64)})
			}
		default:
			t.Fatalf("key %s: type %s not dumped", k, typ)
		}
		d.Keys = append(d.Keys, kd)
	}
	return d
}

// published is a message seen on a channel of the backend's prefix.
type published struct {
	Channel string `json:"channel"`
	Payload string `json:"payload"`
}

// day bounds what counts as a time: a number within a day of the dump's
// clock, in milliseconds or in microseconds.
const day = 24 * 3600 * 1000

// timeOffset reports whether s is a time of the dump taken at nowMS, and
// its offset from it in milliseconds, and the unit's factor (1 for
// milliseconds, 1000 for microseconds).
func timeOffset(s string, nowMS int64) (offMS float64, unit int64, ok bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "eE+") || math.IsNaN(v) {
		return 0, 0, false
	}
	for _, u := range []int64{1, 1000} {
		if d := v - float64(nowMS*u); math.Abs(d) < float64(day*u) {
			return d / float64(u), u, true
		}
	}
	return 0, 0, false
}

var tokenRE = regexp.MustCompile(`TOK-[0-9a-z]+`)

// norm is a value as two dumps are compared: a time as its offset from
// the dump's clock, to the nearest 5 seconds; a call token as "TOK".
func norm(s string, nowMS int64) string {
	if off, unit, ok := timeOffset(s, nowMS); ok {
		name := map[int64]string{1: "ms", 1000: "us"}[unit]
		return fmt.Sprintf("<%s now%+ds>", name, 5*int64(math.Round(off/5000)))
	}
	return tokenRE.ReplaceAllString(s, "TOK")
}

// normalized returns d's keys with their values normalised (norm) and
// TTLs to the nearest 5 seconds.
func normalized(d stateDump) map[string]keyDump {
	out := make(map[string]keyDump, len(d.Keys))
	n := func(s string) string { return norm(s, d.NowMS) }
	for _, k := range d.Keys {
		c := keyDump{Key: k.Key, Type: k.Type, TTL: k.TTL}
		if c.TTL > 0 {
			c.TTL = 5 * int64(math.Round(float64(c.TTL)/5))
		}
		if k.Str != nil {
			s := n(*k.Str)
			c.Str = &s
		}
		if k.Hash != nil {
			c.Hash = map[string]string{}
			for f, v := range k.Hash {
				c.Hash[f] = n(v)
			}
		}
		for _, v := range k.List {
			c.List = append(c.List, n(v))
		}
		c.Set = k.Set
		for _, z := range k.ZSet {
			c.ZSet = append(c.ZSet, [2]string{n(z[0]), n(z[1])})
		}
		out[k.Key] = c
	}
	return out
}

// rebase moves a time of a dump taken at from to the same offset from
// to; other values are returned as they are.
func rebase(s string, from, to int64) string {
	off, unit, ok := timeOffset(s, from)
	if !ok {
		return s
	}
	v := float64(to*unit) + off*float64(unit)
	return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
}

// restoreState writes d's keys into c's database, their times moved to
// c's clock (so leases and expiries stand as they stood when d was
// taken).
func restoreState(ctx context.Context, t testing.TB, c *goredis.Client, d stateDump) {
	t.Helper()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	to := now.UnixMilli()
	r := func(s string) string { return rebase(s, d.NowMS, to) }
	for _, k := range d.Keys {
		var err error
		switch k.Type {
		case "string":
			err = c.Set(ctx, k.Key, r(*k.Str), 0).Err()
		case "hash":
			args := make([]any, 0, 2*len(k.Hash))
			for f, v := range k.Hash {
				args = append(args, f, r(v))
			}
			err = c.HSet(ctx, k.Key, args...).Err()
		case "list":
			args := make([]any, len(k.List))
			for i, v := range k.List {
				args[i] = r(v)
			}
			err = c.RPush(ctx, k.Key, args...).Err()
		case "set":
			args := make([]any, len(k.Set))
			for i, v := range k.Set {
				args[i] = v
			}
			err = c.SAdd(ctx, k.Key, args...).Err()
		case "zset":
			zs := make([]goredis.Z, len(k.ZSet))
			for i, z := range k.ZSet {
				score, perr := strconv.ParseFloat(r(z[1]), 64)
				if perr != nil {
					t.Fatalf("%s: score %q: %v", k.Key, z[1], perr)
				}
				zs[i] = goredis.Z{Member: z[0], Score: score}
			}
			err = c.ZAdd(ctx, k.Key, zs...).Err()
		default:
			t.Fatalf("key %s: type %s not restored", k.Key, k.Type)
		}
		if err == nil && k.TTL > 0 {
			err = c.Expire(ctx, k.Key, time.Duration(k.TTL)*time.Second).Err()
		}
		if err != nil {
			t.Fatalf("restoring %s: %v", k.Key, err)
		}
	}
}
