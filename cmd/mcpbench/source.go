package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// maxSources bounds the --source list (a range is expanded).
const maxSources = 4096

// sourceList is the --source flag: local IPv4 addresses to dial from,
// given as a comma-separated list of addresses and ranges (FIRST-LAST,
// where LAST is a whole address or the last octet of one).
type sourceList []netip.Addr

func (s *sourceList) String() string {
	parts := make([]string, len(*s))
	for i, a := range *s {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

func (s *sourceList) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		addrs, err := parseSourceItem(item)
		if err != nil {
			return err
		}
		if len(*s)+len(addrs) > maxSources {
			return fmt.Errorf("more than %d addresses", maxSources)
		}
		*s = append(*s, addrs...)
	}
	return nil
}

// parseSourceItem parses one address or range of the --source flag.
func parseSourceItem(item string) ([]netip.Addr, error) {
	first, last, isRange := strings.Cut(item, "-")
	a, err := parseIPv4(first)
	if err != nil {
		return nil, err
	}
	if !isRange {
		return []netip.Addr{a}, nil
	}
	last = strings.TrimSpace(last)
	var b netip.Addr
	if !strings.Contains(last, ".") {
		// FIRST-N: N replaces the last octet of FIRST.
		oct := a.As4()
		full := fmt.Sprintf("%d.%d.%d.%s", oct[0], oct[1], oct[2], last)
		if b, err = parseIPv4(full); err != nil {
			return nil, fmt.Errorf("not an address range: %q", item)
		}
	} else if b, err = parseIPv4(last); err != nil {
		return nil, err
	}
	if b.Less(a) {
		return nil, fmt.Errorf("range %q ends before it starts", item)
	}
	var out []netip.Addr
	for x := a; ; x = x.Next() {
		if len(out) == maxSources {
			return nil, fmt.Errorf("range %q has more than %d addresses", item, maxSources)
		}
		out = append(out, x)
		if x == b {
			return out, nil
		}
	}
}

func parseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("not an IPv4 address: %q", s)
	}
	return a, nil
}

// sourceKey marks a context with the index of the worker (or stream) its
// requests belong to: with --source, its connections are dialed from
// source address index mod len.
type sourceKey struct{}

// withSource returns ctx marked with index i.
func withSource(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, sourceKey{}, i)
}

// sourceIndex returns the index ctx was marked with.
func sourceIndex(ctx context.Context) (int, bool) {
	i, ok := ctx.Value(sourceKey{}).(int)
	return i, ok
}
