package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Config is the resource server's settings as a program takes them from
// flags or the environment. The zero value means authorization is off.
type Config struct {
	// Issuer is the authorization server's issuer identifier. Empty turns
	// authorization off; everything else then must be empty too.
	Issuer string
	// Resource is the canonical URI of the MCP endpoint as clients reach
	// it (https://mcp.example.com/mcp); tokens must name it as audience.
	Resource string
	// Scopes every request needs, space- or comma-separated.
	Scopes string
	// JWKSURL overrides the JWKS location found by discovery.
	JWKSURL string
	// IntrospectionURL overrides the introspection endpoint found by
	// discovery. Used when ClientID is set.
	IntrospectionURL string
	// ClientID and ClientSecret, when set, make the node verify every
	// token by RFC 7662 introspection (opaque tokens, or JWTs that must
	// be checked for revocation) instead of by signature.
	ClientID     string
	ClientSecret string
	// Algorithms is the JWS allow-list, comma-separated (default: all
	// asymmetric ones).
	Algorithms string
	// ClockSkew on exp/nbf (DefaultClockSkew, at most MaxClockSkew).
	ClockSkew time.Duration
	// CacheTTL bounds how long an introspection answer is reused
	// (DefaultIntrospectionTTL).
	CacheTTL time.Duration
}

// Enabled reports whether authorization is configured.
func (c *Config) Enabled() bool { return c.Issuer != "" }

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// New checks the configuration and builds the resource description and
// its verifier. hc makes the calls to the authorization server (nil: a
// client with a 10s timeout). It does no I/O.
func (c *Config) New(hc *http.Client) (*Resource, TokenVerifier, error) {
	if !c.Enabled() {
		if c.Resource != "" || c.ClientID != "" || c.ClientSecret != "" || c.JWKSURL != "" || c.IntrospectionURL != "" {
			return nil, nil, errors.New("auth: settings given without an issuer")
		}
		return nil, nil, errors.New("auth: no issuer configured")
	}
	res := &Resource{URI: c.Resource, AuthorizationServers: []string{c.Issuer}, Scopes: splitList(c.Scopes)}
	if err := res.Validate(); err != nil {
		return nil, nil, err
	}
	if (c.ClientID == "") != (c.ClientSecret == "") {
		return nil, nil, errors.New("auth: introspection needs both a client id and a client secret")
	}
	if c.ClientID != "" {
		if c.JWKSURL != "" {
			return nil, nil, errors.New("auth: set a JWKS URL or introspection client credentials, not both")
		}
		v, err := NewIntrospectionVerifier(IntrospectionOptions{
			Issuer: c.Issuer, Audience: res.URI, Endpoint: c.IntrospectionURL,
			ClientID: c.ClientID, ClientSecret: c.ClientSecret, CacheTTL: c.CacheTTL, HTTPClient: hc,
		})
		return res, v, err
	}
	if c.IntrospectionURL != "" {
		return nil, nil, errors.New("auth: an introspection URL needs client credentials")
	}
	v, err := NewJWTVerifier(JWTOptions{
		Issuer: c.Issuer, Audience: res.URI, JWKSURL: c.JWKSURL,
		Algorithms: splitList(c.Algorithms), ClockSkew: c.ClockSkew, HTTPClient: hc,
	})
	if err != nil {
		return nil, nil, err
	}
	return res, v, nil
}

// String describes the configuration for a start-up log line, without
// the secret.
func (c *Config) String() string {
	if !c.Enabled() {
		return "off"
	}
	mode := "jwt"
	if c.ClientID != "" {
		mode = "introspection"
	}
	return fmt.Sprintf("issuer=%s resource=%s mode=%s scopes=%q", c.Issuer, c.Resource, mode, c.Scopes)
}
