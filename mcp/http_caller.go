package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Who a request counts against: the per-caller limits (http_callers.go)
// are kept under a caller key, the principal's id when the request is
// authenticated, else the client's address.

// callerIPv6Bits groups IPv6 clients by their /64: one host usually holds
// a whole /64, so counting its addresses apart would multiply its limits.
const callerIPv6Bits = 64

// maxForwardHops bounds the entries of X-Forwarded-For (or Forwarded)
// read from the right: past them the last one read counts as the client.
const maxForwardHops = 16

// callerKey is the key a request's caller is counted under: "p:" and the
// principal's id when authenticated, else "a:" and the client address
// (see clientAddr), an IPv6 one as its /64.
func callerKey(r *http.Request, trusted []netip.Prefix) string {
	if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok && info.caller != "" {
		return info.caller
	}
	if id := PrincipalFromContext(r.Context()).ID(); id != "" {
		return "p:" + id
	}
	a := clientAddr(r.RemoteAddr, r.Header, trusted)
	if !a.IsValid() {
		return "a:" + r.RemoteAddr
	}
	var buf [64]byte // "a:" and an address or prefix, encoded on the stack
	if a.Is6() {
		p, _ := a.Prefix(callerIPv6Bits)
		if !p.IsValid() {
			return "a:" + p.String()
		}
		return string(p.AppendTo(append(buf[:0], "a:"...)))
	}
	return string(a.AppendTo(append(buf[:0], "a:"...)))
}

// noteCaller keeps the caller key in the request's info, so it is
// worked out once per request.
func noteCaller(ctx context.Context, key string) {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		info.caller = key
	}
}

// clientAddr returns the address of the client of a request that came
// from peer (host:port, as http.Request.RemoteAddr). Forwarding headers
// are believed only from trusted proxies: when the peer is one, the
// chain of X-Forwarded-For (or, without it, the for= of Forwarded) is
// walked from the right, each hop appended by the trusted proxy before
// it, skipping trusted addresses; the first untrusted one is the client.
// An entry that is not an address ends the walk at the proxy that
// appended it. Without a trusted peer, the peer is the client.
func clientAddr(peer string, h http.Header, trusted []netip.Prefix) netip.Addr {
	a := parseHop(peer)
	if !a.IsValid() || !isTrusted(a, trusted) {
		return a
	}
	hops := forwardHops(h)
	for i := len(hops) - 1; i >= 0 && len(hops)-i <= maxForwardHops; i-- {
		next := parseHop(hops[i])
		if !next.IsValid() {
			return a
		}
		a = next
		if !isTrusted(a, trusted) {
			return a
		}
	}
	return a
}

// forwardHops returns the forwarding chain, client first: every
// X-Forwarded-For entry, or the for= parameters of Forwarded (RFC 7239)
// when there is no X-Forwarded-For. Only the last maxForwardHops entries
// are kept.
func forwardHops(h http.Header) []string {
	var hops []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, line := range xff {
			for e := range strings.SplitSeq(line, ",") {
				hops = appendHop(hops, strings.TrimSpace(e))
			}
		}
		return hops
	}
	for _, line := range h.Values("Forwarded") {
		for elem := range strings.SplitSeq(line, ",") {
			for pair := range strings.SplitSeq(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					hops = appendHop(hops, strings.Trim(strings.TrimSpace(v), `"`))
				}
			}
		}
	}
	return hops
}

// appendHop appends e, keeping the newest maxForwardHops entries.
func appendHop(hops []string, e string) []string {
	if len(hops) == 2*maxForwardHops {
		hops = append(hops[:0], hops[maxForwardHops:]...)
	}
	return append(hops, e)
}

// parseHop parses one address as forwarding headers and RemoteAddr
// write it: "1.2.3.4", "1.2.3.4:80", "2001:db8::1", "[2001:db8::1]" or
// "[2001:db8::1]:80". IPv4-mapped IPv6 addresses become IPv4, and a zone
// is dropped. Anything else is the zero Addr.
func parseHop(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return canon(ap.Addr())
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return canon(a)
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return canon(a)
		}
	}
	return netip.Addr{}
}

func canon(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseTrustedProxies parses CIDR ranges or single addresses.
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR range nor an address", s)
		}
		a = canon(a)
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
