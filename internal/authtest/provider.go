// Package authtest runs a real OpenID provider on loopback for tests:
// github.com/zitadel/oidc/v3's op package over a small in-memory
// storage. It issues real JWT (or opaque) access tokens through client
// credentials and through the authorization code flow with PKCE, honours
// the RFC 8707 resource parameter (the token's audience), serves RFC 8414
// and OIDC discovery, a JWKS, and RFC 7662 introspection, and can rotate
// its signing key.
package authtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Client is an OAuth client registered with the provider.
type Client struct {
	ID string
	// Secret authenticates a confidential client (client_secret_basic);
	// empty makes a public client, which must use PKCE.
	Secret string
	// RedirectURIs of the authorization code flow.
	Redirects []string
	// Scopes the client may ask for, besides the OpenID ones.
	Scopes []string
	// Opaque makes the provider issue opaque access tokens (to be
	// introspected) instead of JWTs.
	Opaque bool
	// Audience is the token audience when a request names no resource;
	// empty means the provider's DefaultResource.
	Audience string
}

var _ op.Client = (*Client)(nil)

func (c *Client) GetID() string                    { return c.ID }
func (c *Client) RedirectURIs() []string           { return c.Redirects }
func (c *Client) PostLogoutRedirectURIs() []string { return nil }
func (c *Client) ApplicationType() op.ApplicationType {
	return op.ApplicationTypeWeb
}
func (c *Client) AuthMethod() oidc.AuthMethod {
	if c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (c *Client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *Client) GrantTypes() []oidc.GrantType {
	g := []oidc.GrantType{oidc.GrantTypeCode}
	if c.Secret != "" {
		g = append(g, oidc.GrantTypeClientCredentials)
	}
	return g
}
func (c *Client) LoginURL(id string) string { return "/login?id=" + url.QueryEscape(id) }
func (c *Client) AccessTokenType() op.AccessTokenType {
	if c.Opaque {
		return op.AccessTokenTypeBearer
	}
	return op.AccessTokenTypeJWT
}
func (c *Client) IDTokenLifetime() time.Duration { return 5 * time.Minute }
func (c *Client) DevMode() bool                  { return true } // http loopback redirect URIs
func (c *Client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *Client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *Client) IsScopeAllowed(scope string) bool     { return slices.Contains(c.Scopes, scope) }
func (c *Client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *Client) ClockSkew() time.Duration             { return 0 }

// Options configures Start.
type Options struct {
	// Clients to register.
	Clients []*Client
	// DefaultResource is the audience of tokens whose request names no
	// resource (RFC 8707).
	DefaultResource string
	// DefaultUser is the subject the login step authenticates when the
	// authorization request has no login_hint ("alice").
	DefaultUser string
	// TokenLifetime of access tokens (5 minutes).
	TokenLifetime time.Duration
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is the provider's issuer identifier, http://127.0.0.1:port.
	Issuer        string
	TokenLifetime time.Duration

	opts    Options
	clients map[string]*Client
	store   *storage
	op      *op.Provider
	srv     *httptest.Server
}

type resourceKey struct{}

// Start runs a provider on a loopback port until the test ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	p, err := New("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// New runs a provider listening on addr (a loopback host:port; port 0
// picks a free one) until Close. The issuer is http://<the address>.
func New(addr string, opts Options) (*Provider, error) {
	if opts.DefaultUser == "" {
		opts.DefaultUser = "alice"
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = 5 * time.Minute
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{ReadHeaderTimeout: 10 * time.Second}}
	p := &Provider{
		Issuer:        "http://" + ln.Addr().String(),
		TokenLifetime: opts.TokenLifetime,
		opts:          opts,
		clients:       map[string]*Client{},
		srv:           srv,
	}
	for _, c := range opts.Clients {
		p.clients[c.ID] = c
	}
	key, err := newSigningKey()
	if err != nil {
		ln.Close()
		return nil, err
	}
	p.store = &storage{p: p, keys: []*signingKey{key}, requests: map[string]*authRequest{}, codes: map[string]string{}, tokens: map[string]*issued{}}
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	p.op, err = op.NewProvider(&op.Config{
		CryptoKey:      cryptoKey,
		CodeMethodS256: true,
		AuthMethodPost: true,
	}, p.store, op.StaticIssuer(p.Issuer), op.WithAllowInsecure(), op.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", p.login)
	mux.Handle("/", captureResource(p.op))
	srv.Config.Handler = mux
	srv.Start()
	return p, nil
}

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// captureResource puts the RFC 8707 resource parameter of an
// authorization or token request in the context, where the storage
// reads it to set the token's audience.
func captureResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err == nil {
			if res := r.Form.Get("resource"); res != "" {
				r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// audience is the audience of a token issued now to clientID.
func (p *Provider) audience(ctx context.Context, clientID string) []string {
	if res, ok := ctx.Value(resourceKey{}).(string); ok {
		return []string{res}
	}
	if c := p.clients[clientID]; c != nil && c.Audience != "" {
		return []string{c.Audience}
	}
	return []string{p.opts.DefaultResource}
}

// login is the provider's login page: it authenticates the request's
// user at once and goes on to the authorization callback.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if err := p.store.approve(id, p.opts.DefaultUser); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(op.ContextWithIssuer(r.Context(), p.Issuer), id), http.StatusFound)
}

// RotateKey adds a new signing key and signs with it from now on; the
// old keys stay in the JWKS. It returns the new key id.
func (p *Provider) RotateKey(t testing.TB) string {
	t.Helper()
	id, err := p.store.rotate()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// SigningKeyID is the id of the key that signs now.
func (p *Provider) SigningKeyID() string {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return p.store.keys[len(p.store.keys)-1].id
}

// Endpoint returns the absolute URL of a provider path.
func (p *Provider) Endpoint(path string) string { return p.Issuer + path }

// tokenResponse is the token endpoint's answer.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	Scope       string `json:"scope"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

func (p *Provider) token(ctx context.Context, form url.Values, id, secret string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.op.TokenEndpoint().Absolute(p.Issuer), strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tr tokenResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tr); err != nil {
		return "", fmt.Errorf("token endpoint: status %d: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		return "", fmt.Errorf("token endpoint: status %d: %s: %s", resp.StatusCode, tr.Error, tr.Description)
	}
	return tr.AccessToken, nil
}

// ClientCredentials gets an access token for a confidential client with
// the client credentials grant. resource may be empty.
func (p *Provider) ClientCredentials(ctx context.Context, id, secret, resource string, scopes ...string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	if resource != "" {
		form.Set("resource", resource)
	}
	return p.token(ctx, form, id, secret)
}

// AuthorizationCode runs the authorization code flow with PKCE (S256)
// for a public client, as a user agent would: authorize, log in as user
// (the provider's default user when empty), follow the redirect back,
// and exchange the code. It returns the access token.
func (p *Provider) AuthorizationCode(ctx context.Context, clientID, redirectURI, resource, user string, scopes ...string) (string, error) {
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	state := rand.Text()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {clientID},
		"redirect_uri":          {redirectURI},
		"scope":                 {strings.Join(append([]string{oidc.ScopeOpenID}, scopes...), " ")},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	if resource != "" {
		q.Set("resource", resource)
	}
	if user != "" {
		q.Set("login_hint", user)
	}
	agent := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURI) || len(via) > 10 {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.op.AuthorizationEndpoint().Absolute(p.Issuer)+"?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := agent.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	back, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("authorize: status %d, no redirect: %w", resp.StatusCode, err)
	}
	if back.Query().Get("state") != state {
		return "", fmt.Errorf("authorize: redirect %s carries the wrong state", back)
	}
	code := back.Query().Get("code")
	if code == "" {
		return "", fmt.Errorf("authorize: redirect without code: %s", back.Query().Get("error_description"))
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"client_id":     {clientID},
		"code_verifier": {verifier},
	}
	if resource != "" {
		form.Set("resource", resource)
	}
	return p.token(ctx, form, "", "")
}
