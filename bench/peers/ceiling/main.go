// Command ceiling is the benchmark's upper bound: a trivial net/http
// handler that decodes each JSON-RPC request and encodes a JSON answer,
// with no MCP machinery at all. It answers initialize (with an
// Mcp-Session-Id), notifications (202), tools/call echo (the text back)
// and DELETE (204), which is enough for mcpbench's echo and churn
// scenarios. Its throughput is what net/http and encoding/json alone
// reach on the machine.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"net/http"

	"github.com/mcpcluster/mcpcluster/bench/peers/serve"
)

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  struct {
		ProtocolVersion string `json:"protocolVersion"`
		Name            string `json:"name"`
		Arguments       struct {
			Text string `json:"text"`
		} `json:"arguments"`
	} `json:"params"`
}

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   any             `json:"error,omitempty"`
}

func handle(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "parse error", http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification or a reply
		return
	}
	resp := response{JSONRPC: "2.0", ID: req.ID}
	switch req.Method {
	case "initialize":
		var b [18]byte
		_, _ = rand.Read(b[:])
		w.Header().Set("Mcp-Session-Id", base64.RawURLEncoding.EncodeToString(b[:]))
		resp.Result = map[string]any{
			"protocolVersion": req.Params.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "ceiling", "version": "1"},
		}
	case "tools/call":
		resp.Result = map[string]any{"content": []content{{Type: "text", Text: req.Params.Arguments.Text}}}
	default:
		resp.Error = map[string]any{"code": -32601, "message": "method not found"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8092", "listen address; the endpoint is http://ADDR/mcp")
	flag.Parse()
	serve.Run("ceiling", *addr, http.HandlerFunc(handle))
}
