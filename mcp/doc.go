// Package mcp is the public API of mcpcluster: protocol types, the Server
// with its registries of tools, resources and prompts, typed tool
// registration, the request context handlers use to talk back to the
// client, and the transports (stdio and Streamable HTTP) that serve it.
//
// One Server speaks every supported MCP revision at once: the
// handshake-era revisions (2025-03-26, 2025-06-18, 2025-11-25) with
// sessions, and the stateless 2026-07-28 revision, chosen per request.
//
// # Who may see and use what
//
// A request's caller is Request.Principal: the verified token's subject,
// issuer and scopes that an authentication layer in front of the HTTP
// handler (the bearer middleware of package mcp/auth) put in the request
// context, or nil (no authentication, and always on stdio). Access is
// decided in three places, all of which see it:
//
//   - Receiving middleware (AddReceivingMiddleware) sees every request,
//     initialize included, and may refuse it by returning an error: an
//     *Error of its choosing, or an InsufficientScopeError.
//   - ServerOptions.FeatureFilter decides per request which tools,
//     prompts, resources and resource templates the caller may see.
//   - A tool, prompt, resource or template may declare RequiredScopes.
//
// A feature the caller may not see is left out of its lists (cursors run
// over what it may see, so pages stay consistent) and a call, get or read
// of it is answered exactly as one of a feature that does not exist, so
// nothing can be probed. A feature without a principal to check its
// RequiredScopes against is hidden the same way. One exception makes
// step-up possible: an authenticated caller that lacks the scopes of a
// feature the filter admits gets an InsufficientScopeError, which behind
// the mcp/auth middleware is an HTTP 403 with
// `WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`
// naming every scope needed, so the client can obtain a token with more
// scope and retry (the step-up of the MCP authorization spec). That
// caller learns the feature's name exists; a feature the filter hides
// gives nothing away.
//
// Lists may thus differ between callers, as the spec allows ("MAY vary by
// the authorization presented"); on 2026-07-28 their cacheScope is
// private whenever there is a principal. list_changed notifications still
// follow changes of the registrations and of SetEnabled, sent to every
// session and listener; a change of what one caller may see (a token
// with more scope) sends none: the client lists again after a step-up.
//
// # Skills
//
// A skill (the Skills extension, io.modelcontextprotocol/skills) is a
// folder of files with a SKILL.md whose YAML frontmatter holds at least
// its name and description. AddSkillsFS registers every folder of a file
// system holding a SKILL.md, at its path; AddSkill registers one from
// values:
//
//	err := s.AddSkill(mcp.Skill{Path: "acme/refunds", Files: map[string][]byte{
//		"SKILL.md":          []byte("---\nname: refunds\ndescription: Process refund requests.\n---\n# Refunds\n"),
//		"examples/email.md": []byte("Dear customer, ..."),
//	}})
//
// Registration checks the skill (the name follows the Agent Skills rules
// and equals the path's last segment; the frontmatter is one YAML mapping
// within bounds; no file over ServerOptions.MaxSkillFileBytes, at most
// SkillMaxFiles files and SkillMaxBytes in all) and computes each file's
// SHA-256 digest once; a bad skill is an error wrapping ErrInvalidSkill,
// never a panic. The skill is then served as skill://acme/refunds/SKILL.md
// and skill://acme/refunds/examples/email.md: on every revision through
// resources/read, its SKILL.md listed in resources/list under the
// frontmatter's name and description; on 2026-07-28, where the server
// declares the extension with directoryRead (and the resources
// capability), through skills/list (paginated, with ttlMs and
// cacheScope), skills/get (the frontmatter as written, rendered by the
// YAML 1.2 core schema, and every file's digest and size) and
// resources/directory/read (a folder's children). FeatureFilter (kind
// KindSkill, name the skill's URI) and RequiredScopes decide who sees a
// skill, as for other features; a skill hidden from the caller answers
// every method as one that does not exist. Like other registrations,
// skills are registered alike on every node; SetEnabled(ctx, KindSkill,
// uri, on) switches one on or off for the whole cluster, with one
// resources list_changed.
//
// # What a client sees when a node dies
//
// Nodes share their state through the backend, so most of a client's
// work survives the node that served it. A call running on a node that
// dies (kill -9, a lost machine) cannot complete, and what the client
// sees depends on the revision:
//
//   - 2025-03-26 to 2025-11-25 (sessions): the session lives in the
//     backend and any node serves it. Every event of a call's SSE stream
//     is recorded before it is sent, so a client that resumes the stream
//     (GET with Last-Event-ID, through the balancer to any node) gets the
//     events it missed, and then the call's end: the error CodeNodeLost
//     (-31003, data.node names the node) once the node's membership lease
//     lapses, or sooner when it restarts with the same node id. Whether
//     the tool's side effects happened is unknown. A reply to a sampling
//     or elicitation request of the dead node is answered HTTP 410.
//   - 2026-07-28 (stateless): a response is not recorded, so a cut call
//     cannot be resumed: the client sees its connection end without a
//     response and sends the request again. A call that must outlive its
//     node is made task-augmented (TaskSupport, the tasks extension): the
//     task's record is in the backend, any node answers tasks/get and
//     tasks/result, and a task whose runner died fails with CodeNodeLost,
//     or, for a tool declared idempotent (TaskIdempotent), runs again on
//     another node.
//
// The other cluster errors: CodeUnavailable (-31000, HTTP 503 with
// Retry-After) while the shared state cannot be reached or the bus
// between nodes reconnects; CodeDraining (-31005) from a node that is
// shutting down. IsRetryable reports the codes worth sending the request
// again for. A balancer in front of the nodes must not buffer responses,
// must keep idle streams open, and may retry a refused connection but
// never a request already sent (see the README, "Behind a load
// balancer").
//
// # Coming from the official Go SDK
//
// The names follow the MCP schema, as go-sdk's do; what differs:
//
//	go-sdk                                   mcp
//	mcp.NewServer(&impl, opts)               mcp.NewServer(impl, opts) (Implementation by value)
//	mcp.AddTool(s, &mcp.Tool{...}, h)        mcp.AddTool(s, mcp.Tool{...}, h) (Tool by value)
//	h(ctx, *CallToolRequest, In)             h(ctx, *Request, In) (Out, error): Out becomes the
//	  (*CallToolResult, Out, error)            structured result; return *CallToolResult for full control
//	req.Session.CreateMessage(ctx, p)        req.Sample(ctx, p): works on every revision
//	                                           (2026-07-28: the input round is done for you)
//	req.Session.Elicit(ctx, p)               req.Elicit(ctx, p)
//	req.Session.NotifyProgress(ctx, p)       req.Progress(ctx, progress, total, message)
//	                                           (no token plumbing)
//	s.AddPrompt(&Prompt{...}, h)             s.AddPrompt(Prompt{...}, h)
//	s.AddResource(&Resource{...}, h)         s.AddResource(Resource{...}, h)
//	ResourceContents.MIMEType                ResourceContents.MimeType (the schema's spelling)
//	[]*ResourceContents, []*PromptMessage    []ResourceContents, []PromptMessage (values)
//	mcp.NewStreamableHTTPHandler(...)        s.NewHTTPHandler(&HTTPOptions{Backend: b}) (one
//	                                           node; a Redis backend makes it a cluster node)
//	mcp.StdioTransport{}                     s.ServeStdio(ctx, os.Stdin, os.Stdout, nil)
//	ServerOptions.Logger (*slog.Logger)      ServerOptions.Logger (*slog.Logger), HTTPOptions.Logger
//
// Both packages are named mcp: a program using both imports one under
// another name. Handlers read the caller from Request.Principal, the
// revision from Request.ProtocolVersion, and log with Request.Logger.
package mcp
