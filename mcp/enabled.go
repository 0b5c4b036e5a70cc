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
)

// featureStore is where the enabled state of features lives when a
// transport with shared state is attached: the HTTP handler records it in
// the cluster's Registry and tells every node.
type featureStore interface {
	setFeature(ctx context.Context, key string, on bool) (changed bool, err error)
}

func featureKey(kind, name string) string { return kind + ":" + name }

var listChangedOf = map[string]string{
	KindTool:     "notifications/tools/list_changed",
	KindPrompt:   "notifications/prompts/list_changed",
	KindResource: "notifications/resources/list_changed",
}

// SetEnabled enables or disables a registered tool, prompt or resource
// (static, by URI, or a template, by URI template) without removing its
// registration: a disabled feature is not listed and cannot be called,
// read or completed.
//
// Every node of a deployment registers the same features at start-up;
// what changes at run time must be the same on every node, so once an
// HTTP handler is attached the state is cluster state: recorded in the
// shared store, seen by every node's lists within a bus message (and at
// the latest on the node's next heartbeat), and announced with one
// list_changed to every session and listen stream of the deployment.
// Called before a transport is attached (at registration), it sets this
// node's default, which the shared state overrides once recorded.
// Without shared state (stdio), it changes this process only.
//
// Adding or removing registrations at run time (AddTool, RemoveTools...)
// stays local to the node that does it: a cluster must register the same
// features on every node and use SetEnabled for run-time changes.
func (s *Server) SetEnabled(ctx context.Context, kind, name string, on bool) error {
	method, ok := listChangedOf[kind]
	if !ok {
		return fmt.Errorf("mcp: unknown feature kind %q", kind)
	}
	key := featureKey(kind, name)
	s.mu.Lock()
	if !s.registeredLocked(kind, name) {
		s.mu.Unlock()
		return fmt.Errorf("mcp: no %s %q is registered", kind, name)
	}
	store := s.features
	if store == nil {
		changed := s.enabledLocked(key) != on
		s.localOn[key] = on
		s.mu.Unlock()
		if changed {
			s.notifyListChanged(method)
		}
		return nil
	}
	s.mu.Unlock()
	changed, err := store.setFeature(ctx, key, on)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.sharedOn[key] = on
	s.mu.Unlock()
	if changed {
		s.notifyListChanged(method)
	}
	return nil
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
	}
	return false
}

// enabledLocked: the shared state wins, then this node's default, then
// enabled.
func (s *Server) enabledLocked(key string) bool {
	if on, ok := s.sharedOn[key]; ok {
		return on
	}
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
