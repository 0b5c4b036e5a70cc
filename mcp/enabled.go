package mcp

import (
	"context"
	"fmt"
	"maps"
)

// Kinds of features for SetEnabled and Enabled.
const (
	KindTool     = "tool"
	KindPrompt   = "prompt"
	KindResource = "resource" // a static resource by URI, or a template by URI template
	// KindSkill (skills.go) is a skill by URI.
)

// featureStore is where the enabled state of features lives when a
// transport with shared state is attached: the HTTP handler records it in
// the cluster's Registry, which decides atomically whether a call changed
// it, and tells every node. unset is the state of a feature while
// nothing is recorded (this node's default, the same on every node).
type featureStore interface {
	swapFeature(ctx context.Context, key string, on, unset bool) (was bool, err error)
	toggleFeature(ctx context.Context, key string, unset bool) (on bool, err error)
}

func featureKey(kind, name string) string { return kind + ":" + name }

var listChangedOf = map[string]string{
	KindTool:     "notifications/tools/list_changed",
	KindPrompt:   "notifications/prompts/list_changed",
	KindResource: "notifications/resources/list_changed",
	KindSkill:    "notifications/resources/list_changed", // its SKILL.md is listed
}

// SetEnabled enables or disables a registered tool, prompt, resource
// (static, by URI, or a template, by URI template) or skill (by URI)
// without removing its registration: a disabled feature is not listed and
// cannot be called, read or completed. It is SwapEnabled without the previous state.
//
// Every node of a deployment registers the same features at start-up;
// what changes at run time must be the same on every node, so once an
// HTTP handler is attached the state is cluster state: recorded in the
// shared store, seen by every node's lists within a bus message (and at
// the latest on the node's next heartbeat), and announced with one
// list_changed to every session and listen stream of the deployment when
// it changed. Whether it changed is decided by the shared store, not by
// what this node last saw: of two nodes enabling the same feature at
// once, exactly one announces it.
// Called before a transport is attached (at registration), it sets this
// node's default, which the shared state overrides once recorded.
// Without shared state (stdio), it changes this process only.
//
// Adding or removing registrations at run time (AddTool, RemoveTools...)
// stays local to the node that does it: a cluster must register the same
// features on every node and use SetEnabled for run-time changes.
func (s *Server) SetEnabled(ctx context.Context, kind, name string, on bool) error {
	_, err := s.SwapEnabled(ctx, kind, name, on)
	return err
}

// SwapEnabled is SetEnabled returning the state the feature had before,
// read and replaced in one atomic step of the shared store: the state
// changed, and list_changed was sent, exactly when was != on.
func (s *Server) SwapEnabled(ctx context.Context, kind, name string, on bool) (was bool, err error) {
	was, _, err = s.updateEnabled(ctx, kind, name, false, on)
	return was, err
}

// ToggleEnabled flips the state of a registered feature (see SetEnabled)
// in one atomic step of the shared store and returns the new state. The
// flip applies to the cluster's state, not to what this node last saw of
// it, so toggles sent to different nodes in quick succession each flip
// it, and each sends one list_changed.
func (s *Server) ToggleEnabled(ctx context.Context, kind, name string) (on bool, err error) {
	_, on, err = s.updateEnabled(ctx, kind, name, true, false)
	return on, err
}

// updateEnabled flips the state of a feature (toggle) or sets it to on,
// atomically where the state lives, and sends list_changed when it
// changed. It returns the states before and after.
func (s *Server) updateEnabled(ctx context.Context, kind, name string, toggle, on bool) (was, now bool, err error) {
	method, ok := listChangedOf[kind]
	if !ok {
		return false, false, fmt.Errorf("mcp: unknown feature kind %q", kind)
	}
	key := featureKey(kind, name)
	s.mu.Lock()
	if !s.registeredLocked(kind, name) {
		s.mu.Unlock()
		return false, false, fmt.Errorf("mcp: no %s %q is registered", kind, name)
	}
	if store := s.features; store != nil {
		unset := s.defaultLocked(key)
		s.mu.Unlock()
		if toggle {
			now, err = store.toggleFeature(ctx, key, unset)
			was = !now
		} else {
			was, err = store.swapFeature(ctx, key, on, unset)
			now = on
		}
		if err != nil {
			return false, false, err
		}
		s.mu.Lock()
		s.sharedOn[key] = now
	} else {
		was = s.enabledLocked(key)
		now = on
		if toggle {
			now = !was
		}
		s.localOn[key] = now
		delete(s.sharedOn, key) // what a detached transport last saw
	}
	s.mu.Unlock()
	if was != now {
		s.notifyListChanged(method)
	}
	return was, now, nil
}

// Enabled reports whether a registered feature is enabled (as this node
// last saw the shared state). An unknown feature is not.
func (s *Server) Enabled(kind, name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.registeredLocked(kind, name) && s.enabledLocked(featureKey(kind, name))
}

func (s *Server) registeredLocked(kind, name string) bool {
	switch kind {
	case KindTool:
		return s.tools[name] != nil
	case KindPrompt:
		return s.prompts[name] != nil
	case KindResource:
		return s.resources[name] != nil || s.templates[name] != nil
	case KindSkill:
		return s.skills[name] != nil
	}
	return false
}

// enabledLocked: the shared state wins, then this node's default.
func (s *Server) enabledLocked(key string) bool {
	if on, ok := s.sharedOn[key]; ok {
		return on
	}
	return s.defaultLocked(key)
}

// defaultLocked is this node's default for a feature: what SetEnabled set
// before a transport with shared state was attached, else enabled.
func (s *Server) defaultLocked(key string) bool {
	if on, ok := s.localOn[key]; ok {
		return on
	}
	return true
}

// enabledKeys filters sorted registry keys of kind to the enabled ones
// (under s.mu).
func (s *Server) enabledKeys(kind string, keys []string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if s.enabledLocked(featureKey(kind, k)) {
			out = append(out, k)
		}
	}
	return out
}

// setSharedFeatures replaces the shared state this node knows.
func (s *Server) setSharedFeatures(all map[string]bool) {
	s.mu.Lock()
	s.sharedOn = maps.Clone(all)
	if s.sharedOn == nil {
		s.sharedOn = map[string]bool{}
	}
	s.mu.Unlock()
}

// linkFeatures makes fs the keeper of the enabled state.
func (s *Server) linkFeatures(fs featureStore) {
	s.mu.Lock()
	s.features = fs
	s.mu.Unlock()
}

// unlinkFeatures drops fs as the keeper, if it is.
func (s *Server) unlinkFeatures(fs featureStore) {
	s.mu.Lock()
	if s.features == fs {
		s.features = nil
	}
	s.mu.Unlock()
}
