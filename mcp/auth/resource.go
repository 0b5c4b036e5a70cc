package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// WellKnownPath is where RFC 9728 Protected Resource Metadata lives.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// CanonicalURI returns the canonical form of a resource URI (RFC 8707,
// MCP authorization): an absolute http or https URL with scheme and host
// in lower case, no fragment, no query, and no trailing slash.
func CanonicalURI(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("%q is not an http(s) URL", s)
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("%q has no host", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "", fmt.Errorf("%q has a fragment", s)
	case u.RawQuery != "" || u.ForceQuery:
		return "", fmt.Errorf("%q has a query", s)
	case u.User != nil:
		return "", fmt.Errorf("%q has user info", s)
	}
	return scheme + "://" + strings.ToLower(u.Host) + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// Resource describes this protected resource: what the metadata says
// and what the middleware demands.
type Resource struct {
	// URI is the canonical URI of the MCP endpoint, e.g.
	// https://mcp.example.com/mcp. Tokens must carry it as audience.
	URI string
	// AuthorizationServers are the issuer identifiers clients may get
	// tokens from (at least one).
	AuthorizationServers []string
	// Scopes are the scopes every request needs; they are named in the
	// 401 challenge and a token without them gets 403.
	Scopes []string
	// ScopesSupported is advertised in the metadata; empty means Scopes.
	ScopesSupported []string
	// Name and Documentation are optional metadata (resource_name,
	// resource_documentation).
	Name          string
	Documentation string
}

// Validate checks the resource description and puts URI in canonical form.
func (r *Resource) Validate() error {
	c, err := CanonicalURI(r.URI)
	if err != nil {
		return fmt.Errorf("auth: resource URI: %w", err)
	}
	r.URI = c
	if len(r.AuthorizationServers) == 0 {
		return errors.New("auth: at least one authorization server is required")
	}
	for _, as := range r.AuthorizationServers {
		if _, err := discoveryURLs(as); err != nil {
			return fmt.Errorf("auth: authorization server: %w", err)
		}
	}
	for _, s := range append(r.Scopes, r.ScopesSupported...) {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return fmt.Errorf("auth: scope %q is not a valid scope token", s)
		}
	}
	return nil
}

// MetadataPaths returns the paths the metadata is served at: the root
// well-known path and the form with the resource's path appended
// (RFC 9728 §3.1), e.g. /.well-known/oauth-protected-resource/mcp.
func (r *Resource) MetadataPaths() []string {
	paths := []string{WellKnownPath}
	if p := r.path(); p != "" {
		paths = append(paths, WellKnownPath+p)
	}
	return paths
}

// MetadataURL is the absolute URL clients are pointed at in challenges:
// the path-suffixed form, which names this resource unambiguously.
func (r *Resource) MetadataURL() string {
	u, _ := url.Parse(r.URI)
	return u.Scheme + "://" + u.Host + WellKnownPath + r.path()
}

func (r *Resource) path() string {
	u, err := url.Parse(r.URI)
	if err != nil {
		return ""
	}
	return strings.TrimRight(u.EscapedPath(), "/")
}

// metadata is the RFC 9728 §2 document.
type metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
}

// MetadataHandler serves the Protected Resource Metadata document. Mount
// it at every path of MetadataPaths, outside the bearer middleware.
func (r *Resource) MetadataHandler() http.Handler {
	scopes := r.ScopesSupported
	if len(scopes) == 0 {
		scopes = r.Scopes
	}
	doc, err := json.Marshal(metadata{
		Resource:               r.URI,
		AuthorizationServers:   r.AuthorizationServers,
		ScopesSupported:        withoutOffline(scopes),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           r.Name,
		ResourceDocumentation:  r.Documentation,
	})
	if err != nil {
		panic(err) // only strings and string slices: cannot fail
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(doc)
	})
}

// withoutOffline drops offline_access, which 2026-07-28 says servers
// should not advertise.
func withoutOffline(scopes []string) []string {
	var out []string
	for _, s := range scopes {
		if s != "offline_access" {
			out = append(out, s)
		}
	}
	return out
}
