package mcp

import (
	"net/http"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// serveDelete ends a session everywhere (coordinator.Node.EndSession).
// Only the session's own caller may end it; another gets the answer for
// a session that does not exist. The caller's lease of the session is
// released with it.
func (h *HTTPHandler) serveDelete(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get(headerVersion); v != "" && IsModernVersion(v) {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "protocol version %s has no sessions", v))
		return
	}
	if v := r.Header.Get(headerVersion); v != "" && !IsSupportedVersion(v) {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, UnsupportedVersionError(v))
		return
	}
	sid := r.Header.Get(headerSession)
	if sid == "" {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "missing %s header", headerSession))
		return
	}
	caller := callerKey(r, h.callers.trusted)
	live, err := h.node.EndSession(r.Context(), sid, PrincipalFromContext(r.Context()).ID(), h.callers.SessionsSet(caller))
	if err != nil {
		writeError(w, statusOf(err, false), jsonrpc.ID{}, rpcError(err))
		return
	}
	if !live {
		writeError(w, http.StatusNotFound, jsonrpc.ID{}, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "session not found"))
		return
	}
	h.metrics.Session("ended")
	h.callers.EndedSession(caller, sid)
	w.WriteHeader(http.StatusNoContent)
}
