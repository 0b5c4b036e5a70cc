package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/cluster"
)

// members implements cluster.Membership: a node's lease is an expiry.
type members store

var _ cluster.Membership = (*members)(nil)

func (m *members) Heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	s := (*store)(m)
	if err := s.check(ctx, "Members.Heartbeat"); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("heartbeat %q: ttl must be positive", node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[node] = s.now().Add(ttl)
	return nil
}

func (m *members) Alive(ctx context.Context, node string) (bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Members.Alive"); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.nodes[node]
	return ok && !expired(exp, s.now()), nil
}

func (m *members) Leave(ctx context.Context, node string) error {
	s := (*store)(m)
	if err := s.check(ctx, "Members.Leave"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, node)
	return nil
}

// Members returns the live nodes sorted by name.
func (m *members) Members(ctx context.Context) ([]string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Members.Members"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []string
	for node, exp := range s.nodes {
		if expired(exp, now) {
			delete(s.nodes, node)
			continue
		}
		out = append(out, node)
	}
	slices.Sort(out)
	return out, nil
}

// claims implements cluster.Claims. Keys "session:<id>:<rest>" are indexed
// by session so that End can release them.
type claims store

var _ cluster.Claims = (*claims)(nil)

type claim struct {
	owner   string
	expires time.Time
}

// claimSession returns the session id a claim key belongs to, or "" when
// the key is not of the form "session:<id>:<rest>".
func claimSession(key string) string {
	rest, ok := strings.CutPrefix(key, "session:")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, ":")
	if !ok {
		return ""
	}
	return id
}

// holderLocked returns the live claim on key, dropping an expired one.
func (s *store) holderLocked(key string, now time.Time) *claim {
	c := s.claims[key]
	if c == nil {
		return nil
	}
	if expired(c.expires, now) {
		s.dropClaimLocked(key)
		return nil
	}
	return c
}

func (s *store) dropClaimLocked(key string) {
	delete(s.claims, key)
	if id := claimSession(key); id != "" {
		if keys := s.bySess[id]; keys != nil {
			delete(keys, key)
			if len(keys) == 0 {
				delete(s.bySess, id)
			}
		}
	}
}

// pruneKeysLocked drops expired claims and once tokens.
func (s *store) pruneKeysLocked(now time.Time) {
	for key, c := range s.claims {
		if expired(c.expires, now) {
			s.dropClaimLocked(key)
		}
	}
	for key, exp := range s.once {
		if expired(exp, now) {
			delete(s.once, key)
		}
	}
}

// roomLocked makes sure one more key fits under MaxKeys.
func (s *store) roomLocked(now time.Time) error {
	if len(s.claims)+len(s.once) < s.opts.MaxKeys {
		return nil
	}
	s.pruneKeysLocked(now)
	if len(s.claims)+len(s.once) < s.opts.MaxKeys {
		return nil
	}
	return fmt.Errorf("%d claims and tokens: %w", s.opts.MaxKeys, cluster.ErrLimit)
}

func (m *claims) Claim(ctx context.Context, key, owner string, ttl time.Duration) (string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Claims.Claim"); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", fmt.Errorf("claim %q: ttl must be positive", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var prev string
	if c := s.holderLocked(key, now); c != nil {
		prev = c.owner
	}
	return prev, s.claimLocked(key, owner, ttl, now)
}

// claimLocked makes owner the holder of key for ttl; s.mu is held.
func (s *store) claimLocked(key, owner string, ttl time.Duration, now time.Time) error {
	if c := s.holderLocked(key, now); c != nil {
		c.owner, c.expires = owner, now.Add(ttl)
		return nil
	}
	if err := s.roomLocked(now); err != nil {
		return err
	}
	s.claims[key] = &claim{owner: owner, expires: now.Add(ttl)}
	if id := claimSession(key); id != "" {
		keys := s.bySess[id]
		if keys == nil {
			keys = make(map[string]struct{})
			s.bySess[id] = keys
		}
		keys[key] = struct{}{}
	}
	return nil
}

func (m *claims) Renew(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Claims.Renew"); err != nil {
		return false, err
	}
	if ttl <= 0 {
		return false, fmt.Errorf("claim %q: ttl must be positive", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.holderLocked(key, now)
	if c == nil || c.owner != owner {
		return false, nil
	}
	c.expires = now.Add(ttl)
	return true, nil
}

func (m *claims) Release(ctx context.Context, key, owner string) error {
	s := (*store)(m)
	if err := s.check(ctx, "Claims.Release"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseClaimLocked(key, owner, s.now())
	return nil
}

// releaseClaimLocked drops owner's claim on key; s.mu is held.
func (s *store) releaseClaimLocked(key, owner string, now time.Time) {
	if c := s.holderLocked(key, now); c != nil && c.owner == owner {
		s.dropClaimLocked(key)
	}
}

func (m *claims) Holder(ctx context.Context, key string) (string, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Claims.Holder"); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.holderLocked(key, s.now()); c != nil {
		return c.owner, nil
	}
	return "", nil
}

func (m *claims) Once(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	s := (*store)(m)
	if err := s.check(ctx, "Claims.Once"); err != nil {
		return false, err
	}
	if ttl <= 0 {
		return false, fmt.Errorf("once %q: ttl must be positive", key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if exp, ok := s.once[key]; ok && !expired(exp, now) {
		return false, nil
	}
	if err := s.roomLocked(now); err != nil {
		return false, err
	}
	s.once[key] = now.Add(ttl)
	return true, nil
}

func (m *claims) RenewMany(ctx context.Context, claims []cluster.Held, ttl time.Duration) ([]bool, error) {
	held := make([]bool, len(claims))
	for i, c := range claims {
		ok, err := m.Renew(ctx, c.Key, c.Owner, ttl)
		if err != nil {
			return nil, err
		}
		held[i] = ok
	}
	return held, nil
}
