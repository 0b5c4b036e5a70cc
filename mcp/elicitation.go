package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// URLElicitationRequiredError is returned by a handler that cannot go on
// until the user completes one or more URL-mode elicitations (an OAuth
// consent, a payment page). Each needs URL, Message and ElicitationID.
//
// On 2025-11-25 it reaches the client as error -32042 with
// data.elicitations; the client opens the URLs and retries. On 2026-07-28,
// where -32042 is no longer used, the same handler code yields an
// input_required result whose input requests are those URL elicitations,
// and the handler runs again when the client retries with the answers.
// Earlier revisions have no URL mode: the error is reported as such.
type URLElicitationRequiredError struct {
	Elicitations []ElicitParams
}

func (e *URLElicitationRequiredError) Error() string {
	return fmt.Sprintf("mcp: %d URL elicitation(s) required", len(e.Elicitations))
}

// URLElicitationRequired builds the error for the given elicitations.
func URLElicitationRequired(elicitations ...ElicitParams) error {
	for i := range elicitations {
		elicitations[i].Mode = "url"
	}
	return &URLElicitationRequiredError{Elicitations: elicitations}
}

// urlElicitationError turns a handler's URLElicitationRequiredError into
// what the request's revision expects; other errors pass unchanged.
func (r *Request) urlElicitationError(err error) error {
	if err == nil {
		return nil // without errors.As, whose target escapes
	}
	var ue *URLElicitationRequiredError
	if !errors.As(err, &ue) {
		return err
	}
	if !r.caps.Elicitation.supportsURL() || !atLeast(r.version, Version20251125) {
		return r.capabilityError("elicitation.url", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}})
	}
	if !r.modern {
		for _, e := range ue.Elicitations {
			if e.URL == "" || e.ElicitationID == "" || e.Message == "" {
				return errors.New("mcp: a URL elicitation needs url, message and elicitationId")
			}
		}
		return jsonrpc.NewError(jsonrpc.CodeURLElicitationRequired, "URL elicitation required", map[string]any{"elicitations": ue.Elicitations})
	}
	// 2026-07-28: one MRTR input request per elicitation.
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range ue.Elicitations {
		key, err := r.nextInputKey(nil)
		if err != nil {
			return err
		}
		e.ElicitationID = ""
		r.pending[key] = inputRequest{Method: "elicitation/create", Params: e}
	}
	return &inputRequired{}
}

// ElicitationComplete tells the client that the URL-mode elicitation it
// started (elicitationID) is complete (notifications/elicitation/complete,
// 2025-11-25). It is sent on this request's channel; a completion that
// happens after the request ended goes through HTTPHandler.NotifySession.
func (r *Request) ElicitationComplete(ctx context.Context, elicitationID string) error {
	if r.modern || !atLeast(r.version, Version20251125) {
		return nil // the notification exists only on 2025-11-25
	}
	if r.out == nil {
		return ErrNoChannel
	}
	msg, err := jsonrpc.Notification("notifications/elicitation/complete", map[string]any{"elicitationId": elicitationID})
	if err != nil {
		return err
	}
	return r.sendNotification(ctx, msg)
}
