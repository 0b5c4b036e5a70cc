package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpcluster/mcpcluster/internal/jsonschema"
	"github.com/mcpcluster/mcpcluster/internal/seal"
	"github.com/mcpcluster/mcpcluster/internal/uritemplate"
)

// ServerOptions configure a Server. A zero field means its documented
// default (DefaultServerOptions); a negative number or duration is an
// error (Validate), reported by the transports.
type ServerOptions struct {
	// Instructions are returned to clients at initialize/discover.
	Instructions string
	// PageSize is the number of items per list page (default 100).
	PageSize int
	// RequestTimeout bounds how long a server→client request (sampling,
	// elicitation, roots, ping) waits for its reply (default 60s).
	RequestTimeout time.Duration
	// StateKeys seal MRTR requestState (AES-256, 32 bytes each; the first
	// seals, all open). Every node of a cluster must share them. With none,
	// a random key of this process is used, which only a single node can
	// work with: NewHTTPHandler refuses a shared backend (not the
	// in-memory one) without them (ErrNoStateKeys).
	StateKeys [][]byte
	// StateTTL is how long a sealed requestState stays valid (default 10m).
	StateTTL time.Duration
	// ListTTL is the ttlMs cache hint on list results and server/discover
	// for 2026-07-28 requests (default 0: stale immediately).
	ListTTL time.Duration
	// Logger receives the server's own logs (default: discarded), with
	// "component":"mcp".
	Logger *slog.Logger
	// Zerolog, for programs that log with zerolog (the reference node
	// does), is used instead of Logger when set.
	Zerolog *zerolog.Logger
	// NoListChanged disables list_changed notifications and the
	// listChanged capability flags.
	NoListChanged bool
	// MaxClientInfoBytes bounds the encoded clientInfo of initialize,
	// which the session stores and every later request reads back
	// (default 4096). A larger one gets -32602.
	MaxClientInfoBytes int
	// MaxCapabilitiesBytes bounds the encoded client capabilities of
	// initialize, stored with the session (default 16384).
	MaxCapabilitiesBytes int
	// MaxURIBytes bounds the uri of resources/subscribe and
	// resources/unsubscribe, which the session stores (default 2048),
	// and of each resourceSubscriptions entry of subscriptions/listen.
	MaxURIBytes int
	// MaxSubscriptions bounds the resourceSubscriptions (and any other
	// list, such as taskIds) of one subscriptions/listen request, and a
	// stdio session's resources/subscribe (default 1024,
	// DefaultMaxSubscriptions, the backends' bound on an HTTP session).
	MaxSubscriptions int
	// MaxSkillFileBytes bounds one file of a skill (default 4 MiB): a
	// larger one is refused at registration (AddSkill and its siblings)
	// with an error naming it.
	MaxSkillFileBytes int
	// FeatureFilter, when set, decides per request whether its caller may
	// see and use a feature: kind is KindTool, KindPrompt, KindResource or
	// KindSkill and name the tool or prompt name, resource URI or URI
	// template, or skill URI (the keys of SetEnabled). req.Principal() is
	// the caller (nil without authentication, as on stdio). A feature it refuses is not listed,
	// and a call, get or read of it is answered as one of a feature that
	// does not exist. It is consulted on every list, call, get, read and
	// prompt completion, outside the server's locks, and must be fast,
	// safe for concurrent use, and give the same answer on every node of
	// a deployment (a function of the request and the configuration, not
	// of node-local state), since a client's pages and calls may land on
	// different nodes. Features with RequiredScopes are also checked
	// against the principal's scopes: see InsufficientScopeError.
	FeatureFilter func(ctx context.Context, req *Request, kind, name string) bool
}

// ToolHandler handles tools/call for one tool with raw arguments.
type ToolHandler func(ctx context.Context, req *Request, args json.RawMessage) (*CallToolResult, error)

// ResourceHandler reads a resource (or a resource of a template; vars
// then holds the template variables).
type ResourceHandler func(ctx context.Context, req *Request, uri string, vars map[string]string) (*ReadResourceResult, error)

// PromptHandler renders a prompt.
type PromptHandler func(ctx context.Context, req *Request, args map[string]string) (*GetPromptResult, error)

// CompletionHandler completes an argument of a prompt or resource
// template.
type CompletionHandler func(ctx context.Context, req *Request, params *CompleteRequest) (*Completion, error)

type toolEntry struct {
	tool    Tool
	handler ToolHandler
	headers []jsonschema.HeaderParam // x-mcp-header arguments
}

type resourceEntry struct {
	res     Resource
	handler ResourceHandler
}

type templateEntry struct {
	tmpl    ResourceTemplate
	parsed  *uritemplate.Template
	handler ResourceHandler
}

type promptEntry struct {
	prompt  Prompt
	handler PromptHandler
}

// Server holds the registries and serves MCP over any transport. It is
// safe for concurrent use; registrations may change at run time, and each
// change notifies clients (list_changed) through every attached transport.
type Server struct {
	impl Implementation
	opts ServerOptions

	implOnce sync.Once // implEnc, implErr: impl encoded (see implJSON)
	implEnc  json.RawMessage
	implErr  error

	log    zerolog.Logger // with "component":"mcp"
	base   zerolog.Logger // the program's logger
	sealer *seal.Sealer

	mu         sync.RWMutex
	tools      map[string]*toolEntry
	resources  map[string]*resourceEntry
	templates  map[string]*templateEntry
	prompts    map[string]*promptEntry
	skills     map[string]*skillEntry // by URI (skill://<path>/SKILL.md)
	completion CompletionHandler
	subscribe  bool // resources/subscribe offered
	// Enabled state of features (see SetEnabled): this node's defaults,
	// the shared state last loaded, and where the shared state is kept.
	localOn  map[string]bool
	sharedOn map[string]bool
	features featureStore

	hubsMu sync.Mutex
	hubs   []hub

	localOnce onceTable // consumed requestStates without a shared store

	mw middlewares // receiving and sending method middleware

	taskEngine atomic.Bool // a transport that runs tasks (HTTP) serves this server
}

// hub is a transport's way to deliver unsolicited notifications: a
// list_changed to every session/listener once, a resources/updated to the
// subscribers of a URI.
type hub interface {
	listChanged(ctx context.Context, method string)
	resourceUpdated(ctx context.Context, uri string)
}

// NewServer returns a server that identifies itself as impl.
func NewServer(impl Implementation, opts *ServerOptions) *Server {
	s := &Server{
		impl:      impl,
		tools:     map[string]*toolEntry{},
		resources: map[string]*resourceEntry{},
		templates: map[string]*templateEntry{},
		prompts:   map[string]*promptEntry{},
		skills:    map[string]*skillEntry{},
		subscribe: true,
		localOn:   map[string]bool{},
		sharedOn:  map[string]bool{},
	}
	if opts != nil {
		s.opts = *opts
	}
	s.base = logger(s.opts.Logger, s.opts.Zerolog)
	s.log = s.base.With().Str("component", "mcp").Logger()
	if len(s.opts.StateKeys) > 0 {
		sl, err := seal.New(s.opts.StateKeys...)
		if err != nil {
			panic(fmt.Sprintf("mcp: invalid StateKeys: %v", err))
		}
		s.sealer = sl
	} else {
		// A key of this process: NewHTTPHandler refuses a shared
		// backend without a shared key.
		s.sealer = seal.NewRandom()
	}
	return s
}

// Implementation returns the server's identity.
func (s *Server) Implementation() Implementation { return s.impl }

func (s *Server) attach(h hub) {
	s.hubsMu.Lock()
	s.hubs = append(s.hubs, h)
	s.hubsMu.Unlock()
}

func (s *Server) detach(h hub) {
	s.hubsMu.Lock()
	defer s.hubsMu.Unlock()
	for i, x := range s.hubs {
		if x == h {
			s.hubs = append(s.hubs[:i], s.hubs[i+1:]...)
			return
		}
	}
}

func (s *Server) eachHub(fn func(hub)) {
	s.hubsMu.Lock()
	hs := append([]hub(nil), s.hubs...)
	s.hubsMu.Unlock()
	for _, h := range hs {
		fn(h)
	}
}

// notifyListChanged tells every attached transport that a list changed.
func (s *Server) notifyListChanged(method string) {
	if s.opts.NoListChanged {
		return
	}
	ctx := context.Background()
	s.sendChange(ctx, method, "", func() { s.eachHub(func(h hub) { h.listChanged(ctx, method) }) })
}

// ResourceUpdated tells the sessions subscribed to uri (and modern listen
// streams that asked for it) that the resource changed, on every node.
func (s *Server) ResourceUpdated(ctx context.Context, uri string) {
	s.sendChange(ctx, "notifications/resources/updated", uri, func() { s.eachHub(func(h hub) { h.resourceUpdated(ctx, uri) }) })
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// AddToolRaw registers a tool with a raw handler. The tool's InputSchema
// must be a JSON object schema ({"type":"object"} when empty). A tool with
// an invalid name or schema panics: registrations are made at start-up
// and a bad one is a programming error. Adding a tool that exists
// replaces it.
func (s *Server) AddToolRaw(t Tool, h ToolHandler) {
	if !toolNameRE.MatchString(t.Name) {
		panic(fmt.Sprintf("mcp: invalid tool name %q: use 1-128 characters of [A-Za-z0-9_.-]", t.Name))
	}
	if h == nil {
		panic("mcp: nil tool handler for " + t.Name)
	}
	if len(t.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(t.InputSchema, &root); err != nil || root.Type != "object" {
		panic(fmt.Sprintf("mcp: tool %q: inputSchema must be a JSON object schema with \"type\":\"object\"", t.Name))
	}
	var schema map[string]any
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		panic(fmt.Sprintf("mcp: tool %q: inputSchema: %v", t.Name, err))
	}
	checkScopes("tool "+t.Name, t.RequiredScopes)
	headers, err := jsonschema.MCPHeaders(schema)
	if err != nil {
		panic(fmt.Sprintf("mcp: tool %q: x-mcp-header: %v", t.Name, err))
	}
	s.mu.Lock()
	s.tools[t.Name] = &toolEntry{tool: t, handler: h, headers: headers}
	s.mu.Unlock()
	s.notifyListChanged("notifications/tools/list_changed")
}

// RemoveTools removes tools by name and notifies clients if any existed.
func (s *Server) RemoveTools(names ...string) {
	removeEntries(s, s.tools, names, "notifications/tools/list_changed")
}

// AddResource registers a static resource.
func (s *Server) AddResource(r Resource, h ResourceHandler) {
	if r.URI == "" || h == nil {
		panic("mcp: resource needs a URI and a handler")
	}
	if r.Name == "" {
		r.Name = r.URI
	}
	checkScopes("resource "+r.URI, r.RequiredScopes)
	s.mu.Lock()
	s.resources[r.URI] = &resourceEntry{res: r, handler: h}
	s.mu.Unlock()
	s.notifyListChanged("notifications/resources/list_changed")
}

// RemoveResources removes static resources by URI.
func (s *Server) RemoveResources(uris ...string) {
	removeEntries(s, s.resources, uris, "notifications/resources/list_changed")
}

// AddResourceTemplate registers a resource template (RFC 6570). A read of
// a URI that matches no static resource is matched against templates.
func (s *Server) AddResourceTemplate(t ResourceTemplate, h ResourceHandler) {
	p, err := uritemplate.Parse(t.URITemplate)
	if err != nil {
		panic(fmt.Sprintf("mcp: resource template %q: %v", t.URITemplate, err))
	}
	if h == nil {
		panic("mcp: nil resource template handler")
	}
	if t.Name == "" {
		t.Name = t.URITemplate
	}
	checkScopes("resource template "+t.URITemplate, t.RequiredScopes)
	s.mu.Lock()
	s.templates[t.URITemplate] = &templateEntry{tmpl: t, parsed: p, handler: h}
	s.mu.Unlock()
	s.notifyListChanged("notifications/resources/list_changed")
}

// AddPrompt registers a prompt.
func (s *Server) AddPrompt(p Prompt, h PromptHandler) {
	if p.Name == "" || h == nil {
		panic("mcp: prompt needs a name and a handler")
	}
	checkScopes("prompt "+p.Name, p.RequiredScopes)
	s.mu.Lock()
	s.prompts[p.Name] = &promptEntry{prompt: p, handler: h}
	s.mu.Unlock()
	s.notifyListChanged("notifications/prompts/list_changed")
}

// RemovePrompts removes prompts by name.
func (s *Server) RemovePrompts(names ...string) {
	removeEntries(s, s.prompts, names, "notifications/prompts/list_changed")
}

// SetCompletionHandler installs the handler of completion/complete and
// turns on the completions capability.
func (s *Server) SetCompletionHandler(h CompletionHandler) {
	s.mu.Lock()
	s.completion = h
	s.mu.Unlock()
}

// capabilities returns what the server offers now.
func (s *Server) capabilities(version string) ServerCapabilities {
	s.mu.RLock()
	defer s.mu.RUnlock()
	lc := !s.opts.NoListChanged
	c := ServerCapabilities{
		Logging: &struct{}{},
		Tools:   &ListChangedCap{ListChanged: lc},
	}
	if len(s.prompts) > 0 {
		c.Prompts = &ListChangedCap{ListChanged: lc}
	}
	if len(s.resources) > 0 || len(s.templates) > 0 || len(s.skills) > 0 {
		c.Resources = &ResourcesCapability{Subscribe: s.subscribe, ListChanged: lc}
	}
	if s.completion != nil {
		c.Completions = &struct{}{}
	}
	if IsModernVersion(version) {
		c.Extensions = map[string]any{ExtensionTasks: map[string]any{}}
		if len(s.skills) > 0 {
			c.Extensions[ExtensionSkills] = skillsExtension()
		}
	}
	if version == Version20251125 && s.taskEngine.Load() {
		c.Tasks = tasksCapability()
	}
	return c
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ToolNames returns the names of the registered tools that are enabled
// (see SetEnabled), sorted.
func (s *Server) ToolNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.enabledKeys(KindTool, sortedKeys(s.tools))
}

// PromptNames returns the names of the registered prompts, sorted.
func (s *Server) PromptNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sortedKeys(s.prompts)
}

// removeEntries deletes keys from one of the registries and sends the
// list_changed notification when anything was there.
func removeEntries[V any](s *Server, m map[string]V, keys []string, notification string) {
	s.mu.Lock()
	n := 0
	for _, k := range keys {
		if _, ok := m[k]; ok {
			delete(m, k)
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.notifyListChanged(notification)
	}
}
