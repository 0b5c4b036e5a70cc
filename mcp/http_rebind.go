package mcp

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// DNS-rebinding protection. A page on an attacker's site can make a
// browser resolve the attacker's name to 127.0.0.1 and send requests to a
// node listening there: the browser then sends the attacker's Host (and
// Origin). A node that accepts only loopback names on loopback
// connections, and only allowed origins, is out of its reach.

// hostAllowed checks the Host header: see HTTPOptions.AllowedHosts.
func (h *HTTPHandler) hostAllowed(r *http.Request) bool {
	if isLoopbackHost(r.Host) {
		return true
	}
	name := r.Host
	if hn, _, err := net.SplitHostPort(r.Host); err == nil {
		name = hn
	}
	for _, a := range h.opts.AllowedHosts {
		if a == "*" || strings.EqualFold(a, r.Host) || strings.EqualFold(a, name) {
			return true
		}
	}
	if len(h.opts.AllowedHosts) > 0 {
		return false
	}
	// Without a list, only a request that came in on a loopback address
	// is checked (whatever the listen address: 0.0.0.0 accepts those too).
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return !ok || local == nil || !isLoopbackHost(local.String())
}

// originAllowed checks the Origin header: requests without one (not from
// a browser) pass; see HTTPOptions.AllowedOrigins.
func (h *HTTPHandler) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, o := range h.opts.AllowedOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	if h.opts.AllowLoopbackOrigins {
		u, err := url.Parse(origin)
		if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			return isLoopbackHost(u.Host)
		}
	}
	return false
}

// isLoopbackHost reports whether a host, with or without a port and IPv6
// brackets, is localhost or a loopback IP address.
func isLoopbackHost(host string) bool {
	if hn, _, err := net.SplitHostPort(host); err == nil {
		host = hn
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
