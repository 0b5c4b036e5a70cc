package mcp

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Protocol revisions this server speaks.
const (
	Version20250326 = "2025-03-26"
	Version20250618 = "2025-06-18"
	Version20251125 = "2025-11-25"
	Version20260728 = "2026-07-28"
)

// LegacyVersions are the handshake-era revisions, oldest first.
var LegacyVersions = []string{Version20250326, Version20250618, Version20251125}

// ModernVersions are the stateless revisions, oldest first.
var ModernVersions = []string{Version20260728}

// SupportedVersions lists every revision served, oldest first.
var SupportedVersions = append(slices.Clone(LegacyVersions), ModernVersions...)

// LatestLegacyVersion is offered when a client asks for an unknown
// legacy version.
const LatestLegacyVersion = Version20251125

// IsLegacyVersion reports whether v is a supported handshake-era revision.
func IsLegacyVersion(v string) bool { return slices.Contains(LegacyVersions, v) }

// IsModernVersion reports whether v is a supported stateless revision.
func IsModernVersion(v string) bool { return slices.Contains(ModernVersions, v) }

// IsSupportedVersion reports whether v is any supported revision.
func IsSupportedVersion(v string) bool { return IsLegacyVersion(v) || IsModernVersion(v) }

// atLeast reports whether revision v is at or after min. Revisions are
// dates, so they compare as strings.
func atLeast(v, min string) bool { return v >= min }

// Reserved _meta keys.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaRelatedTask        = "io.modelcontextprotocol/related-task"
)

// Meta is a _meta object.
type Meta map[string]any

// Icon is an icon a client may show (2025-11-25+).
type Icon struct {
	Src      string   `json:"src"`
	MimeType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}

// Implementation names a client or server.
type Implementation struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Icons       []Icon `json:"icons,omitempty"`
	WebsiteURL  string `json:"websiteUrl,omitempty"`
}

// ClientCapabilities are what a client declares (at initialize, or per
// request on 2026-07-28). Unknown members are kept in Raw.
type ClientCapabilities struct {
	Experimental map[string]any         `json:"experimental,omitempty"`
	Roots        *RootsCapability       `json:"roots,omitempty"`
	Sampling     *SamplingCapability    `json:"sampling,omitempty"`
	Elicitation  *ElicitationCapability `json:"elicitation,omitempty"`
	Tasks        json.RawMessage        `json:"tasks,omitempty"`
	Extensions   map[string]any         `json:"extensions,omitempty"`
}

// RootsCapability is the client's roots capability.
type RootsCapability struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// SamplingCapability is the client's sampling capability.
type SamplingCapability struct {
	Context *struct{} `json:"context,omitempty"`
	Tools   *struct{} `json:"tools,omitempty"`
}

// ElicitationCapability is the client's elicitation capability. An empty
// object means form mode only.
type ElicitationCapability struct {
	Form *struct{} `json:"form,omitempty"`
	URL  *struct{} `json:"url,omitempty"`
}

// supportsForm reports form-mode support ({} counts as form).
func (e *ElicitationCapability) supportsForm() bool {
	return e != nil && (e.Form != nil || e.URL == nil)
}

func (e *ElicitationCapability) supportsURL() bool { return e != nil && e.URL != nil }

// ServerCapabilities are what the server offers.
type ServerCapabilities struct {
	Experimental map[string]any       `json:"experimental,omitempty"`
	Logging      *struct{}            `json:"logging,omitempty"`
	Completions  *struct{}            `json:"completions,omitempty"`
	Prompts      *ListChangedCap      `json:"prompts,omitempty"`
	Resources    *ResourcesCapability `json:"resources,omitempty"`
	Tools        *ListChangedCap      `json:"tools,omitempty"`
	Extensions   map[string]any       `json:"extensions,omitempty"`
	// Tasks is the 2025-11-25 tasks capability (list, cancel,
	// requests.tools.call), offered where tasks run (HTTP).
	Tasks map[string]any `json:"tasks,omitempty"`
}

// ListChangedCap is a capability with a listChanged flag.
type ListChangedCap struct {
	ListChanged bool `json:"listChanged,omitempty"`
}

// ResourcesCapability is the server's resources capability.
type ResourcesCapability struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// Annotations qualify resources and content.
type Annotations struct {
	Audience     []string `json:"audience,omitempty"`
	Priority     *float64 `json:"priority,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
}

// Content is one content block: text, image, audio, resource_link or an
// embedded resource. Build blocks with TextContent, ImageContent and the
// other constructors.
type Content struct {
	Type        string            `json:"type"`
	Text        string            `json:"text,omitempty"`
	Data        string            `json:"data,omitempty"`
	MimeType    string            `json:"mimeType,omitempty"`
	Resource    *ResourceContents `json:"resource,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Name        string            `json:"name,omitempty"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Annotations *Annotations      `json:"annotations,omitempty"`
	Meta        Meta              `json:"_meta,omitempty"`
	// Sampling with tools (2025-11-25+): tool_use and tool_result blocks.
	ID                string          `json:"id,omitempty"`
	Input             json.RawMessage `json:"input,omitempty"`
	ToolUseID         string          `json:"toolUseId,omitempty"`
	Content           []Content       `json:"content,omitempty"`
	StructuredContent any             `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// TextContent returns a text block.
func TextContent(text string) Content { return Content{Type: "text", Text: text} }

// ImageContent returns an image block; data is base64.
func ImageContent(data, mimeType string) Content {
	return Content{Type: "image", Data: data, MimeType: mimeType}
}

// AudioContent returns an audio block; data is base64.
func AudioContent(data, mimeType string) Content {
	return Content{Type: "audio", Data: data, MimeType: mimeType}
}

// EmbeddedResource returns a resource block.
func EmbeddedResource(r ResourceContents) Content { return Content{Type: "resource", Resource: &r} }

// ResourceLink returns a resource_link block (2025-06-18+).
func ResourceLink(uri, name, mimeType string) Content {
	return Content{Type: "resource_link", URI: uri, Name: name, MimeType: mimeType}
}

// ResourceContents is the content of a resource: Text or Blob (base64).
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
	Meta     Meta   `json:"_meta,omitempty"`
}

// ToolAnnotations are hints about a tool's behaviour.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Tool describes a tool.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	Icons        []Icon           `json:"icons,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Meta         Meta             `json:"_meta,omitempty"`
	// RequiredScopes are the OAuth scopes a caller's token must carry to
	// see and use this tool (see ServerOptions.FeatureFilter). They are
	// part of the registration only and never sent to clients.
	RequiredScopes []string `json:"-"`
	// TaskSupport says whether a call runs as a durable task (see
	// TaskSupport; not on the wire of 2026-07-28, where the server alone
	// decides). The same handler serves task and immediate calls.
	TaskSupport TaskSupport `json:"-"`
	// TaskIdempotent marks the tool safe to run again: a task whose node
	// is lost is then run on another node instead of failing (as does
	// Annotations.IdempotentHint).
	TaskIdempotent bool `json:"-"`
	// Execution is filled by the server from TaskSupport on 2025-11-25
	// (execution.taskSupport); leave it nil.
	Execution *ToolExecution `json:"execution,omitempty"`
}

// CallToolResult is the result of tools/call.
type CallToolResult struct {
	Content           []Content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError,omitempty"`
	Meta              Meta      `json:"_meta,omitempty"`
}

// Resource describes a resource.
type Resource struct {
	URI         string       `json:"uri"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Size        *int64       `json:"size,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
	Meta        Meta         `json:"_meta,omitempty"`
	// RequiredScopes are the OAuth scopes a caller's token must carry to
	// see and use this resource (see ServerOptions.FeatureFilter). They are
	// part of the registration only and never sent to clients.
	RequiredScopes []string `json:"-"`
}

// ResourceTemplate describes a family of resources by RFC 6570 template.
type ResourceTemplate struct {
	URITemplate string       `json:"uriTemplate"`
	Name        string       `json:"name"`
	Title       string       `json:"title,omitempty"`
	Description string       `json:"description,omitempty"`
	MimeType    string       `json:"mimeType,omitempty"`
	Annotations *Annotations `json:"annotations,omitempty"`
	Icons       []Icon       `json:"icons,omitempty"`
	Meta        Meta         `json:"_meta,omitempty"`
	// RequiredScopes are the OAuth scopes a caller's token must carry to
	// see and use this template and every resource read through it (see ServerOptions.FeatureFilter). They are
	// part of the registration only and never sent to clients.
	RequiredScopes []string `json:"-"`
}

// ReadResourceResult is the result of resources/read.
type ReadResourceResult struct {
	Contents []ResourceContents `json:"contents"`
	Meta     Meta               `json:"_meta,omitempty"`
}

// PromptArgument describes one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Prompt describes a prompt.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Icons       []Icon           `json:"icons,omitempty"`
	Meta        Meta             `json:"_meta,omitempty"`
	// RequiredScopes are the OAuth scopes a caller's token must carry to
	// see and use this prompt (see ServerOptions.FeatureFilter). They are
	// part of the registration only and never sent to clients.
	RequiredScopes []string `json:"-"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// GetPromptResult is the result of prompts/get.
type GetPromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
	Meta        Meta            `json:"_meta,omitempty"`
}

// CompletionRef names what completion/complete completes.
type CompletionRef struct {
	Type string `json:"type"` // "ref/prompt" or "ref/resource"
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// CompleteRequest is the params of completion/complete.
type CompleteRequest struct {
	Ref      CompletionRef `json:"ref"`
	Argument struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"argument"`
	Context *struct {
		Arguments map[string]string `json:"arguments,omitempty"`
	} `json:"context,omitempty"`
}

// Completion is the result body of completion/complete.
type Completion struct {
	Values  []string `json:"values"`
	Total   *int     `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// SamplingMessage is one message of a sampling request:
//
//	mcp.SamplingMessage{Role: "user", Content: mcp.SamplingContent{mcp.TextContent("Hello")}}
type SamplingMessage struct {
	Role    string          `json:"role"`
	Content SamplingContent `json:"content"`
}

// SamplingContent is the content of a sampling message or result: one
// block, or several (2025-11-25 and later allow an array, with
// tool_use and tool_result blocks). One block is written as an object,
// as every revision reads it; several as an array. Both forms read.
type SamplingContent []Content

// MarshalJSON writes one block as an object, several as an array.
func (c SamplingContent) MarshalJSON() ([]byte, error) {
	if len(c) == 1 {
		return json.Marshal(c[0])
	}
	return json.Marshal([]Content(c))
}

// UnmarshalJSON reads an object or an array of blocks.
func (c *SamplingContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, (*[]Content)(c))
	}
	var one Content
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*c = SamplingContent{one}
	return nil
}

// ModelPreferences guide the client's model choice.
type ModelPreferences struct {
	Hints []struct {
		Name string `json:"name"`
	} `json:"hints,omitempty"`
	CostPriority         *float64 `json:"costPriority,omitempty"`
	SpeedPriority        *float64 `json:"speedPriority,omitempty"`
	IntelligencePriority *float64 `json:"intelligencePriority,omitempty"`
}

// CreateMessageParams are the params of sampling/createMessage.
type CreateMessageParams struct {
	Messages         []SamplingMessage `json:"messages"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	IncludeContext   string            `json:"includeContext,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	Metadata         map[string]any    `json:"metadata,omitempty"`
	Tools            []Tool            `json:"tools,omitempty"`
	ToolChoice       *ToolChoice       `json:"toolChoice,omitempty"`
}

// ToolChoice controls tool use in sampling (2025-11-25+).
type ToolChoice struct {
	Mode string `json:"mode"` // auto, required, none
}

// CreateMessageResult is the client's answer to sampling/createMessage.
type CreateMessageResult struct {
	Role       string          `json:"role"`
	Content    SamplingContent `json:"content"`
	Model      string          `json:"model"`
	StopReason string          `json:"stopReason,omitempty"`
}

// Text returns the text of the first text block, if any.
func (r *CreateMessageResult) Text() string {
	for _, c := range r.Content {
		if c.Type == "text" {
			return c.Text
		}
	}
	return ""
}

// ElicitParams are the params of elicitation/create.
type ElicitParams struct {
	Mode            string         `json:"mode,omitempty"` // "form" (default) or "url"
	Message         string         `json:"message"`
	RequestedSchema map[string]any `json:"requestedSchema,omitempty"`
	URL             string         `json:"url,omitempty"`
	ElicitationID   string         `json:"elicitationId,omitempty"`
}

// ElicitResult is the client's answer to elicitation/create.
type ElicitResult struct {
	Action  string         `json:"action"` // accept, decline, cancel
	Content map[string]any `json:"content,omitempty"`
}

// Root is one client root.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// ListRootsResult is the client's answer to roots/list.
type ListRootsResult struct {
	Roots []Root `json:"roots"`
}

// LogLevel is an RFC 5424 severity as MCP names it.
type LogLevel string

// The log levels, in increasing severity.
const (
	LevelDebug     LogLevel = "debug"
	LevelInfo      LogLevel = "info"
	LevelNotice    LogLevel = "notice"
	LevelWarning   LogLevel = "warning"
	LevelError     LogLevel = "error"
	LevelCritical  LogLevel = "critical"
	LevelAlert     LogLevel = "alert"
	LevelEmergency LogLevel = "emergency"
)

var levelRank = map[LogLevel]int{
	LevelDebug: 0, LevelInfo: 1, LevelNotice: 2, LevelWarning: 3,
	LevelError: 4, LevelCritical: 5, LevelAlert: 6, LevelEmergency: 7,
}

// Valid reports whether l is one of the eight levels.
func (l LogLevel) Valid() bool { _, ok := levelRank[l]; return ok }

// enabled reports whether a message at level msg passes threshold min.
func (l LogLevel) enabled(min LogLevel) bool { return levelRank[l] >= levelRank[min] }
