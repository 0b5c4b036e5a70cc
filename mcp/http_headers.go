package mcp

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strings"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// decodeHeaderValue decodes an MCP request-metadata header value
// (2026-07-28): values that are not plain visible ASCII travel as
// "=?base64?<base64 of UTF-8>?=". Plain values must consist of visible
// ASCII, space and tab, without leading or trailing white space.
func decodeHeaderValue(v string) (string, error) {
	const pre, post = "=?base64?", "?="
	if strings.HasPrefix(v, pre) && strings.HasSuffix(v, post) && len(v) >= len(pre)+len(post) {
		b, err := base64.StdEncoding.DecodeString(v[len(pre) : len(v)-len(post)])
		if err != nil {
			return "", errors.New("malformed base64 header value")
		}
		return string(b), nil
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\t' && (c < 0x20 || c > 0x7e) {
			return "", errors.New("header value has characters outside visible ASCII")
		}
	}
	if strings.TrimSpace(v) != v {
		return "", errors.New("header value has leading or trailing white space")
	}
	return v, nil
}

func headerMismatch(header, format string, args ...any) *jsonrpc.Error {
	e := jsonrpc.Errorf(jsonrpc.CodeHeaderMismatch, format, args...)
	e.Data = mustMarshal(map[string]any{"header": header})
	return e
}

// requiredHeader reads and decodes a header that must be present.
func requiredHeader(h http.Header, name string) (string, *jsonrpc.Error) {
	vals := h.Values(name)
	if len(vals) == 0 {
		return "", headerMismatch(name, "missing required header %s", name)
	}
	if len(vals) > 1 {
		return "", headerMismatch(name, "header %s appears more than once", name)
	}
	v, err := decodeHeaderValue(vals[0])
	if err != nil {
		return "", headerMismatch(name, "header %s: %v", name, err)
	}
	return v, nil
}

// checkHeaders validates the 2026-07-28 request-metadata headers against
// the body: MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-*.
func (s *Server) checkHeaders(h http.Header, req *Request, version string) error {
	if version == "" {
		return headerMismatch(headerVersion, "missing required header %s", headerVersion)
	}
	if version != req.version {
		return headerMismatch(headerVersion, "header %s is %q but _meta says %q", headerVersion, version, req.version)
	}
	method, err := requiredHeader(h, headerMethod)
	if err != nil {
		return err
	}
	if method != req.Method {
		return headerMismatch(headerMethod, "header %s is %q but the body's method is %q", headerMethod, method, req.Method)
	}
	pm := req.members()
	toolName, _ := stringMember(pm.Name)
	var want string
	switch req.Method {
	case "tools/call", "prompts/get":
		want = toolName
	case "resources/read":
		want, _ = stringMember(pm.URI)
	case "tasks/get", "tasks/update", "tasks/cancel":
		// The tasks extension routes on the task id (SEP-2663).
		want, _ = stringMember(pm.TaskID)
	default:
		return nil
	}
	name, err := requiredHeader(h, headerName)
	if err != nil {
		return err
	}
	if name != want {
		return headerMismatch(headerName, "header %s is %q but the body names %q", headerName, name, want)
	}
	if req.Method == "tools/call" {
		return s.checkParamHeaders(h, toolName, pm.Arguments)
	}
	return nil
}

// checkParamHeaders compares Mcp-Param-* headers with the tool arguments
// whose schema properties carry x-mcp-header.
func (s *Server) checkParamHeaders(h http.Header, tool string, args json.RawMessage) error {
	s.mu.RLock()
	e := s.tools[tool]
	s.mu.RUnlock()
	if e == nil || len(e.headers) == 0 {
		return nil
	}
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.UseNumber()
	if len(args) > 0 {
		_ = dec.Decode(&obj)
	}
	for _, hp := range e.headers {
		name := paramHeaderPfx + hp.Name
		val, present := lookupPath(obj, hp.Path)
		vals := h.Values(name)
		if !present || val == nil {
			if len(vals) > 0 {
				return headerMismatch(name, "header %s is set but the argument is absent", name)
			}
			continue
		}
		got, herr := requiredHeader(h, name)
		if herr != nil {
			return herr
		}
		if !headerEquals(got, val) {
			return headerMismatch(name, "header %s does not match the argument", name)
		}
	}
	return nil
}

func lookupPath(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// headerEquals compares a decoded header with an argument value:
// integers numerically, booleans as true/false, strings exactly.
func headerEquals(h string, v any) bool {
	switch x := v.(type) {
	case string:
		return h == x
	case bool:
		if x {
			return h == "true"
		}
		return h == "false"
	case json.Number:
		a, ok1 := new(big.Float).SetString(h)
		b, ok2 := new(big.Float).SetString(string(x))
		return ok1 && ok2 && a.Cmp(b) == 0
	}
	return false
}
