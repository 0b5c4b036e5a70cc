package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/seal"
)

// inputRequest is one MRTR input request: a server→client request
// without an id, answered in the client's retry.
type inputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params"` // always present: {} when there are none
}

// inputRequired ends a round of a stateless request: the handler asked
// the client for something not yet answered.
type inputRequired struct{}

func (*inputRequired) Error() string { return "mcp: input required from the client" }

// sealedState is what requestState carries between rounds: every answer
// received so far (so a handler asking several times in sequence is
// answered from the start on each retry) and the handler's own state.
type sealedState struct {
	Inputs map[string]json.RawMessage `json:"i,omitempty"`
	State  []byte                     `json:"s,omitempty"`
}

// mrtrParams are the MRTR members of a retried request's params.
type mrtrParams struct {
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   *string         `json:"requestState"`
}

// binding ties a sealed state to the principal, the method and the
// request's own params (without the MRTR members and _meta).
func binding(req *Request) (seal.Binding, error) {
	canon, err := seal.CanonicalParams(req.Params, "inputResponses", "requestState", "_meta")
	if err != nil {
		return seal.Binding{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %v", err)
	}
	return seal.Binding{
		Principal:    req.principal.ID(),
		Method:       req.Method,
		ParamsDigest: seal.Digest(req.Method, canon),
	}, nil
}

// openRound reads inputResponses and requestState of a retried stateless
// request into req. Anything that fails verification is rejected with
// -32602.
func (s *Server) openRound(req *Request) error {
	if len(req.Params) == 0 || req.Params[0] != '{' {
		return nil
	}
	pm := req.members()
	var p mrtrParams
	p.InputResponses = pm.InputResponses
	if rs := pm.RequestState; len(rs) > 0 && string(rs) != "null" {
		// A requestState that is not a string is refused here: read as
		// absent it would start a fresh round. Other shape errors are
		// reported by the method itself.
		s, ok := stringMember(rs)
		if !ok {
			return invalidParam("requestState", "must be a string")
		}
		p.RequestState = &s
	}
	inputs := map[string]json.RawMessage{}
	req.retry = p.RequestState != nil || len(p.InputResponses) > 0 && string(p.InputResponses) != "null"
	if p.RequestState != nil {
		b, err := binding(req)
		if err != nil {
			return err
		}
		payload, id, err := s.sealer.Open(*p.RequestState, b, time.Now())
		if err != nil {
			msg := "invalid requestState"
			switch {
			case errors.Is(err, seal.ErrExpired):
				msg = "requestState expired; retry the request from the start"
			case errors.Is(err, seal.ErrMismatch):
				msg = "requestState was issued for another request"
			}
			return jsonrpc.NewError(jsonrpc.CodeInvalidParams, msg, map[string]any{"field": "requestState"})
		}
		var st sealedState
		if err := json.Unmarshal(payload, &st); err != nil {
			return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid requestState", map[string]any{"field": "requestState"})
		}
		for k, v := range st.Inputs {
			inputs[k] = v
		}
		req.state = st.State
		req.stateID = id
	}
	if len(p.InputResponses) > 0 && string(p.InputResponses) != "null" {
		var responses map[string]json.RawMessage
		if err := json.Unmarshal(p.InputResponses, &responses); err != nil {
			return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "inputResponses must be an object", map[string]any{"field": "inputResponses"})
		}
		for k, v := range responses {
			if len(v) == 0 || v[0] != '{' {
				return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "inputResponses."+k+" must be an object", map[string]any{"field": "inputResponses." + k})
			}
			// An answer sealed in an earlier round wins: a retry may add
			// answers, never change one the handler already acted on.
			if _, sealed := inputs[k]; !sealed {
				inputs[k] = v
			}
		}
	}
	req.inputs = inputs
	return nil
}

// ErrStateReused is returned by Request.ConsumeState when the request's
// requestState was already consumed by an earlier retry, on any node.
var ErrStateReused = jsonrpc.NewError(jsonrpc.CodeInvalidParams,
	"requestState was already used; retry the request from the start", map[string]any{"field": "requestState"})

// ConsumeState makes the requestState this retry carries single-use: the
// first call for a given requestState succeeds, on whichever node, and
// every later one (a replayed retry) gets ErrStateReused, which a handler
// returns as is (the client gets -32602). Handlers call it before acting
// on answers where acting twice would do harm (a payment, a message
// sent). Through HTTP the record is kept in the shared store until the
// state expires; over stdio, in the process. On a first round (no
// requestState) and on handshake-era requests it does nothing.
func (r *Request) ConsumeState(ctx context.Context) error {
	if r.stateID == "" {
		return nil
	}
	once := r.once
	if once == nil {
		once = r.srv.localOnce.once
	}
	first, err := once(ctx, "mrtr:"+r.stateID, r.srv.opts.stateTTL())
	if err != nil {
		return rpcError(err)
	}
	if !first {
		return ErrStateReused
	}
	return nil
}

// onceTable is the process-local record of consumed states (stdio, where
// no shared store exists). It holds at most maxOnce entries; expired ones
// are dropped first, and when it is full of live entries the oldest go.
type onceTable struct {
	mu   sync.Mutex
	seen map[string]time.Time // key → expiry
}

const maxOnce = 10000

func (o *onceTable) once(_ context.Context, key string, ttl time.Duration) (bool, error) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if exp, ok := o.seen[key]; ok && now.Before(exp) {
		return false, nil
	}
	if o.seen == nil {
		o.seen = map[string]time.Time{}
	}
	if len(o.seen) >= maxOnce {
		oldest, oldestExp := "", time.Time{}
		for k, exp := range o.seen {
			if !now.Before(exp) {
				delete(o.seen, k)
			} else if oldest == "" || exp.Before(oldestExp) {
				oldest, oldestExp = k, exp
			}
		}
		if len(o.seen) >= maxOnce {
			delete(o.seen, oldest)
		}
	}
	o.seen[key] = now.Add(ttl)
	return true, nil
}

// inputRequiredResult builds the input_required result of a round that
// ended with unanswered input requests.
func (s *Server) inputRequiredResult(req *Request) (map[string]any, error) {
	b, err := binding(req)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(sealedState{Inputs: req.inputs, State: req.state})
	if err != nil {
		return nil, err
	}
	token, err := s.sealer.Seal(b, payload, s.opts.stateTTL(), time.Now())
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"resultType":    "input_required",
		"inputRequests": req.pending,
		"requestState":  token,
	}, nil
}

// runWithInputs runs fn and turns an MRTR input request into the
// input_required result.
func (s *Server) runWithInputs(ctx context.Context, req *Request, fn func(context.Context) (any, error)) (any, error) {
	res, err := fn(ctx)
	err = req.urlElicitationError(err)
	var ir *inputRequired
	if req.modern && (errors.As(err, &ir) || len(req.pending) > 0) {
		return s.inputRequiredResult(req)
	}
	return res, err
}
