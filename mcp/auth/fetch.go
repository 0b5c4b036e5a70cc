package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxDocument bounds every document read from an authorization server
// (discovery metadata, a JWKS, an introspection response).
const maxDocument = 1 << 20

// defaultHTTPTimeout bounds one call to the authorization server when
// the caller's context has no earlier deadline.
const defaultHTTPTimeout = 10 * time.Second

func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Timeout: defaultHTTPTimeout}
}

// getJSON fetches u and decodes its JSON body into v. A transport error
// or a 5xx wraps ErrUnavailable; any other non-200 is a plain error.
func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	return doJSON(c, req, v)
}

func doJSON(c *http.Client, req *http.Request, v any) error {
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, req.Method, redact(req.URL), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return fmt.Errorf("%w: reading %s: %v", ErrUnavailable, redact(req.URL), err)
	}
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%w: %s %s: status %d", ErrUnavailable, req.Method, redact(req.URL), resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d", req.Method, redact(req.URL), resp.StatusCode)
	}
	if len(body) > maxDocument {
		return fmt.Errorf("%s: document larger than %d bytes", redact(req.URL), maxDocument)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %w", redact(req.URL), err)
	}
	return nil
}

// redact drops the query and user info of u for error messages.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	return c.String()
}

// discovery is the part of RFC 8414 / OpenID Connect discovery metadata
// a resource server uses.
type discovery struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// discoveryURLs lists where the metadata of issuer may live, in the
// order tried: RFC 8414 (path inserted after the well-known prefix),
// OpenID Connect Discovery 1.0 (path appended), and the RFC 8414
// compatibility form of OIDC (path inserted) for issuers with a path.
func discoveryURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("issuer %q is not an absolute URL", issuer)
	}
	path := strings.TrimSuffix(u.Path, "/")
	base := u.Scheme + "://" + u.Host
	urls := []string{
		base + "/.well-known/oauth-authorization-server" + path,
		base + path + "/.well-known/openid-configuration",
	}
	if path != "" {
		urls = append(urls, base+"/.well-known/openid-configuration"+path)
	}
	return urls, nil
}

// discover fetches the issuer's metadata, trying each well-known
// location, and checks that the document names the same issuer
// (RFC 8414 §3.3, OIDC Discovery §4.3).
func discover(ctx context.Context, c *http.Client, issuer string) (*discovery, error) {
	urls, err := discoveryURLs(issuer)
	if err != nil {
		return nil, err
	}
	var errs []string
	unavailable := false
	for _, u := range urls {
		var d discovery
		if err := getJSON(ctx, c, u, &d); err != nil {
			errs = append(errs, err.Error())
			unavailable = unavailable || isUnavailable(err)
			continue
		}
		if d.Issuer != issuer {
			return nil, fmt.Errorf("discovery at %s names issuer %q, want %q", u, d.Issuer, issuer)
		}
		return &d, nil
	}
	if unavailable {
		return nil, fmt.Errorf("%w: discovery of %s: %s", ErrUnavailable, issuer, strings.Join(errs, "; "))
	}
	return nil, fmt.Errorf("discovery of %s: %s", issuer, strings.Join(errs, "; "))
}

// endpoint is one URL of the issuer's (the JWKS, the introspection
// endpoint): configured, or read from the discovery document on first
// use. A failed discovery is tried again on the next use.
type endpoint struct {
	client *http.Client
	issuer string
	member string // the metadata member, for errors
	pick   func(*discovery) string

	mu  sync.Mutex
	url string
}

func (e *endpoint) get(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.url != "" {
		return e.url, nil
	}
	d, err := discover(ctx, e.client, e.issuer)
	if err != nil {
		return "", err
	}
	if e.pick(d) == "" {
		return "", fmt.Errorf("issuer %s publishes no %s", e.issuer, e.member)
	}
	e.url = e.pick(d)
	return e.url, nil
}
