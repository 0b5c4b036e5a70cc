package mcp

import (
	"encoding/json"
	"errors"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// paramMembers is a request's params split once into the members that
// the transport and dispatch read before a method decodes its own
// params, each left as raw JSON, and its _meta decoded: header checks,
// the protocol version, tracing, MRTR and the tool name all read this
// instead of decoding the whole params again. Member names match as
// encoding/json matches struct fields, as each reader did on its own.
type paramMembers struct {
	Meta           json.RawMessage `json:"_meta"`
	Name           json.RawMessage `json:"name"`
	URI            json.RawMessage `json:"uri"`
	TaskID         json.RawMessage `json:"taskId"`
	Arguments      json.RawMessage `json:"arguments"`
	RequestState   json.RawMessage `json:"requestState"`
	InputResponses json.RawMessage `json:"inputResponses"`

	raw     json.RawMessage // the params split
	meta    requestMeta     // _meta decoded (zero when absent or null)
	metaErr error           // why _meta did not decode
}

// paramNames are paramMembers' members by name.
var paramNames = [...]string{"_meta", "name", "uri", "taskId", "arguments", "requestState", "inputResponses"}

// set keeps a member of the params if it is one of paramMembers': its
// name matched as encoding/json matches a struct field's (exactly or
// else case-insensitively, bytes.EqualFold), a later member replacing an
// earlier one.
func (pm *paramMembers) set(name, v []byte) {
	if i := jsonrpc.FieldIndex(name, paramNames[:]); i >= 0 {
		*pm.member(i) = v
	}
}

func (pm *paramMembers) member(i int) *json.RawMessage {
	return [...]*json.RawMessage{&pm.Meta, &pm.Name, &pm.URI, &pm.TaskID, &pm.Arguments, &pm.RequestState, &pm.InputResponses}[i]
}

// splitParams splits params (valid JSON, as jsonrpc.Decode returns it).
// Params that are not an object have no members.
func splitParams(params json.RawMessage) *paramMembers {
	pm := &paramMembers{raw: params}
	if len(params) == 0 || params[0] != '{' {
		return pm
	}
	if !json.Valid(params) {
		// A middleware's params, not jsonrpc.Decode's.
		pm.metaErr = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: malformed JSON")
		return pm
	}
	for name, v := range jsonrpc.Members(params) {
		pm.set(name, v)
	}
	if len(pm.Meta) == 0 || string(pm.Meta) == "null" {
		return pm
	}
	if err := json.Unmarshal(pm.Meta, &pm.meta); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			pm.metaErr = invalidParam("_meta."+te.Field, "must be "+te.Type.String())
		} else {
			pm.metaErr = jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid _meta: "+err.Error(), map[string]any{"field": "_meta"})
		}
	}
	return pm
}

// of reports whether pm was split from params (the same bytes: a
// middleware may have replaced a request's params).
func (pm *paramMembers) of(params json.RawMessage) bool {
	if pm == nil || len(pm.raw) != len(params) {
		return false
	}
	return len(params) == 0 || &pm.raw[0] == &params[0]
}

// members returns the request's params split (see paramMembers).
func (r *Request) members() *paramMembers {
	if !r.pm.of(r.Params) {
		r.pm = splitParams(r.Params)
	}
	return r.pm
}

// stringMember decodes a member that should be a string: ok is false
// when it is absent, null or not a string.
func stringMember(raw json.RawMessage) (s string, ok bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	s, err := jsonrpc.UnquoteString(raw)
	return s, err == nil
}

// callParams returns the params of tools/call, from the split members
// when the params are an object.
func (r *Request) callParams() (callParams, error) {
	var p callParams
	if len(r.Params) == 0 || r.Params[0] != '{' {
		return p, decodeParams(r.Params, &p)
	}
	pm := r.members()
	if n := pm.Name; len(n) > 0 && string(n) != "null" {
		name, ok := stringMember(n)
		if !ok {
			return p, invalidParam("name", "must be string")
		}
		p.Name = name
	}
	p.Arguments = pm.Arguments
	return p, nil
}
