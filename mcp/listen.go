package mcp

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// listenFilter is what a subscriptions/listen request asked for.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs asks for notifications/tasks of these tasks (the tasks
	// extension; honoured when the request negotiated it).
	TaskIDs []string `json:"taskIds,omitempty"`
}

// parseListen reads the filter of a subscriptions/listen request and
// narrows it to what the server honours.
func (s *Server) parseListen(params json.RawMessage) (listenFilter, error) {
	var p struct {
		Notifications *struct {
			listenFilter
		} `json:"notifications"`
	}
	if err := decodeParams(params, &p); err != nil {
		return listenFilter{}, err
	}
	if p.Notifications == nil {
		return listenFilter{}, nil
	}
	f := p.Notifications.listenFilter
	maxN := s.opts.maxSubscriptions()
	for _, l := range []struct {
		name string
		n    int
	}{{"notifications.resourceSubscriptions", len(f.ResourceSubscriptions)}, {"notifications.taskIds", len(f.TaskIDs)}} {
		if l.n > maxN {
			return listenFilter{}, invalidParam(l.name, fmt.Sprintf("has %d entries; at most %d are accepted", l.n, maxN))
		}
	}
	maxURI := s.opts.maxURIBytes()
	for i, u := range f.ResourceSubscriptions {
		if len(u) > maxURI {
			return listenFilter{}, invalidParam(fmt.Sprintf("notifications.resourceSubscriptions[%d]", i), fmt.Sprintf("is longer than %d bytes", maxURI))
		}
	}
	if s.opts.NoListChanged {
		f.ToolsListChanged, f.PromptsListChanged, f.ResourcesListChanged = false, false, false
	}
	return f, nil
}

// wants reports whether a notification passes the filter.
func (f *listenFilter) wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		return slices.Contains(f.ResourceSubscriptions, uri)
	case taskNotification:
		return slices.Contains(f.TaskIDs, uri)
	}
	return false
}

// listenAck is the first message of a listen stream.
func listenAck(id jsonrpc.ID, f listenFilter) *jsonrpc.Message {
	msg, _ := jsonrpc.Notification("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": f,
		"_meta":         map[string]any{MetaSubscriptionID: id},
	})
	return msg
}

// listenNotification tags a notification for a listen stream.
func listenNotification(id jsonrpc.ID, method, uri string) *jsonrpc.Message {
	p := map[string]any{"_meta": map[string]any{MetaSubscriptionID: id}}
	if uri != "" {
		p["uri"] = uri
	}
	msg, _ := jsonrpc.Notification(method, p)
	return msg
}

// listenResult ends a listen stream gracefully.
func (s *Server) listenResult(id jsonrpc.ID) *jsonrpc.Message {
	msg, _ := jsonrpc.Response(id, map[string]any{
		"resultType": "complete",
		"_meta":      map[string]any{MetaSubscriptionID: id, MetaServerInfo: s.impl},
	})
	return msg
}

// plainNotification is a list_changed or resources/updated notification
// for a legacy session.
func plainNotification(method, uri string) *jsonrpc.Message {
	var params any
	if uri != "" {
		params = map[string]any{"uri": uri}
	}
	msg, _ := jsonrpc.Notification(method, params)
	return msg
}
