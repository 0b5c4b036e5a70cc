package authtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the provider's in-memory state: clients, signing keys,
// pending authorization requests and issued tokens. It implements
// op.Storage, op.ClientCredentialsStorage and
// op.CanGetPrivateClaimsFromRequest.
type storage struct {
	p *Provider

	mu       sync.Mutex
	keys     []*signingKey // the last one signs
	requests map[string]*authRequest
	codes    map[string]string // code → request id
	tokens   map[string]*issued
}

var (
	_ op.Storage                        = (*storage)(nil)
	_ op.ClientCredentialsStorage       = (*storage)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*storage)(nil)
)

type issued struct {
	subject  string
	clientID string
	scopes   []string
	audience []string
	expiry   time.Time
}

type signingKey struct {
	id  string
	key *ecdsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k *signingKey) Algorithm() jose.SignatureAlgorithm          { return jose.ES256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }
func (k *signingKey) Use() string                                 { return "sig" }

type publicKey struct{ *signingKey }

func (k publicKey) Key() any { return k.key.Public() }

func newSigningKey() (*signingKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &signingKey{id: rand.Text()[:12], key: key}, nil
}

// authRequest is one authorization code request (op.AuthRequest).
type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes, audience                        []string
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	challenge                               *oidc.CodeChallenge
	subject                                 string
	authTime                                time.Time
	done                                    bool
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return a.audience }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// ccRequest is a client credentials token request (op.TokenRequest);
// the client is its own subject.
type ccRequest struct {
	clientID string
	scopes   []string
	audience []string
}

func (c *ccRequest) GetSubject() string    { return c.clientID }
func (c *ccRequest) GetAudience() []string { return c.audience }
func (c *ccRequest) GetScopes() []string   { return c.scopes }

var errNotFound = errors.New("not found")

func (s *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	var challenge *oidc.CodeChallenge
	if req.CodeChallenge != "" {
		challenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	a := &authRequest{
		id:           rand.Text(),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       req.Scopes,
		audience:     s.p.audience(ctx, req.ClientID),
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
		challenge:    challenge,
		subject:      req.LoginHint,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[id]
	if !ok {
		return nil, errNotFound
	}
	return a, nil
}

// approve marks a request as authenticated for subject (the login step).
func (s *storage) approve(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[id]
	if !ok {
		return errNotFound
	}
	if a.subject == "" {
		a.subject = subject
	}
	a.done, a.authTime = true, time.Now()
	return nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[s.codes[code]]
	if !ok {
		return nil, errNotFound
	}
	return a, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for c, rid := range s.codes {
		if rid == id {
			delete(s.codes, c)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	t := &issued{
		subject:  req.GetSubject(),
		scopes:   req.GetScopes(),
		audience: req.GetAudience(),
		expiry:   time.Now().Add(s.p.TokenLifetime),
	}
	switch r := req.(type) {
	case *authRequest:
		t.clientID = r.clientID
	case *ccRequest:
		t.clientID = r.clientID
	}
	id := rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[id] = t
	return id, t.expiry, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("refresh tokens are not supported")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, tokenID, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tokenID)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[len(s.keys)-1], nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.ES256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

// rotate adds a new signing key; earlier keys stay published.
func (s *storage) rotate() (string, error) {
	k, err := newSigningKey()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
	return k.id, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.p.clients[id]
	if !ok {
		return nil, fmt.Errorf("client %q: %w", id, errNotFound)
	}
	return c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.p.clients[id]
	if !ok || c.Secret == "" || c.Secret != secret {
		return errors.New("client authentication failed")
	}
	return nil
}

func (s *storage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.p.clients[id], nil
}

func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c := s.p.clients[id]
	for _, sc := range scopes {
		if !c.IsScopeAllowed(sc) {
			return nil, oidc.ErrInvalidScope().WithDescription("scope %q is not allowed", sc)
		}
	}
	return &ccRequest{clientID: id, scopes: scopes, audience: s.p.audience(ctx, id)}, nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	return nil
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || t.subject != subject || time.Now().After(t.expiry) {
		return errNotFound // answered as active=false
	}
	resp.Active = true
	resp.Subject = t.subject
	resp.ClientID = t.clientID
	resp.Scope = t.scopes
	resp.Audience = t.audience
	resp.Expiration = oidc.FromTime(t.expiry)
	resp.Issuer = s.p.Issuer
	resp.TokenType = oidc.BearerToken
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetPrivateClaimsFromRequest puts the granted resource scopes in the
// access token's "scope" claim (RFC 9068 §2.2.3); "openid" is about the
// ID token and stays out.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, _ op.TokenRequest, scopes []string) (map[string]any, error) {
	var out []string
	for _, sc := range scopes {
		if sc != oidc.ScopeOpenID {
			out = append(out, sc)
		}
	}
	return map[string]any{"scope": strings.Join(out, " ")}, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile is not supported")
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }
