package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// codeRefused is the JSON-RPC error code the refusing middleware uses.
const codeRefused = -32042

// trail records what middlewares and handlers saw, in order.
type trail struct {
	mu  sync.Mutex
	got []string
}

func (tr *trail) add(s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, s)
}

func (tr *trail) reset() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = nil
}

func (tr *trail) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.got)
}

// tagging returns a middleware recording name>method on the way in and
// <name on the way out.
func tagging(tr *trail, name string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
			tr.add(name + ">" + method)
			res, err := next(ctx, method, req)
			tr.add("<" + name)
			return res, err
		}
	}
}

// refusing refuses tools/call of the tool "secret" before it runs.
func refusing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if method == "tools/call" && p.Name == "secret" {
			return nil, mcp.NewError(codeRefused, "refused: "+p.Name, nil)
		}
		return next(ctx, method, req)
	}
}

// middlewareServer registers the tools "mark" and "secret" (each records
// that it ran) and the middlewares a, b, c and refusing.
func middlewareServer(s *mcp.Server, tr *trail) {
	for _, name := range []string{"mark", "secret"} {
		mcp.AddTool(s, mcp.Tool{Name: name, Description: "Records that it ran."},
			func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
				tr.add("run " + name)
				return "ran", nil
			})
	}
	s.AddReceivingMiddleware(tagging(tr, "a"), tagging(tr, "b"))
	s.AddReceivingMiddleware(tagging(tr, "c"), refusing)
}

// Receiving middleware wraps every dispatch in the order added, the first
// outermost, on stdio and on HTTP alike; a middleware that returns an
// error refuses the request, and its error is the JSON-RPC error.
func TestReceivingMiddleware(t *testing.T) {
	cases := []struct {
		tool     string
		want     []string
		wantCode int64
	}{
		{"mark", []string{"a>tools/call", "b>tools/call", "c>tools/call", "run mark", "<c", "<b", "<a"}, 0},
		{"secret", []string{"a>tools/call", "b>tools/call", "c>tools/call", "<c", "<b", "<a"}, codeRefused},
	}
	for _, transport := range []string{"stdio", "http"} {
		for _, tc := range cases {
			t.Run(transport+"/"+tc.tool, func(t *testing.T) {
				tr := &trail{}
				var code int64
				switch transport {
				case "stdio":
					s := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
					middlewareServer(s, tr)
					c := startStdio(t, s, nil)
					c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":{},` + stdioModernMeta + `}}`)
					if l := c.next("the answer"); l.Error != nil {
						code = int64(l.Error.Code)
					}
				case "http":
					n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) { middlewareServer(s, tr) }})
					c := session(t, n.url, mcp.LatestLegacyVersion, nil)
					tr.reset() // initialize went through the chain too
					resp := post(t, c, n.url, "tools/call", toolCall(tc.tool, nil, false), nil)
					for _, m := range resp.Messages {
						if m.Kind() == jsonrpc.KindResponse && m.Error != nil {
							code = m.Error.Code
						}
					}
				}
				if code != tc.wantCode {
					t.Fatalf("got error code %d, want %d", code, tc.wantCode)
				}
				if got := tr.list(); !slices.Equal(got, tc.want) {
					t.Fatalf("got trail %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// Each member of a JSON-RPC batch goes through the receiving middleware,
// and a refused member fails alone.
func TestReceivingMiddlewareBatch(t *testing.T) {
	tr := &trail{}
	n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) { middlewareServer(s, tr) }})
	c := session(t, n.url, mcp.Version20250326, nil) // the last revision with batches
	b1, _ := encodeRequest(t, c, "tools/call", toolCall("mark", nil, false))
	b2, _ := encodeRequest(t, c, "tools/call", toolCall("secret", nil, false))
	body := []byte("[" + string(b1) + "," + string(b2) + "]")
	resp, err := c.PostRaw(context.Background(), n.url, body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answers []struct {
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if err := json.Unmarshal(resp.Body, &answers); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	var ok, refused int
	for _, a := range answers {
		switch {
		case a.Error == nil && a.Result != nil:
			ok++
		case a.Error != nil && a.Error.Code == codeRefused:
			refused++
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("got %d answered and %d refused (body %q), want 1 and 1", ok, refused, resp.Body)
	}
	if got := strings.Count(strings.Join(tr.list(), " "), "a>tools/call"); got != 2 {
		t.Fatalf("the middleware saw %d batch members, want 2 (trail %q)", got, tr.list())
	}
}

// recordSending records the method and session of every message sent.
func recordSending(tr *trail) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
			tr.add(fmt.Sprintf("%s session=%t", method, req.SessionID() != ""))
			return next(ctx, method, req)
		}
	}
}

// Sending middleware sees the server→client requests (sampling) and the
// notifications (progress) of a request, on HTTP and stdio; a refusal
// stops the message and reaches the handler as the error.
func TestSendingMiddleware(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		tr := &trail{}
		n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) { s.AddSendingMiddleware(recordSending(tr)) }})
		c := session(t, n.url, mcp.LatestLegacyVersion, samplingCaps)
		resp := c.Call("tools/call", toolCall("sample", map[string]any{"prompt": "2+2?"}, false), func(m *jsonrpc.Message) *jsonrpc.Message {
			if m.Kind() != jsonrpc.KindRequest {
				return nil
			}
			r, _ := jsonrpc.Response(m.ID, samplingReply)
			return r
		})
		if got := resultText(t, resp); !strings.Contains(got, "4") {
			t.Fatalf("got %q, want the sampled answer", got)
		}
		post(t, c, n.url, "logging/setLevel", map[string]any{"level": "info"}, nil)
		c.Call("tools/call", toolCall("progress", map[string]any{"steps": 1}, true), nil)
		want := []string{"sampling/createMessage session=true", "notifications/progress session=true", "notifications/message session=true"}
		if got := tr.list(); !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		tr := &trail{}
		s := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
		mcp.AddTool(s, mcp.Tool{Name: "sample", Description: "Samples."},
			func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) {
				_, err := req.Sample(ctx, &mcp.CreateMessageParams{MaxTokens: 1})
				if err != nil {
					return "", err
				}
				return "sampled", nil
			})
		s.AddSendingMiddleware(recordSending(tr), func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
				return nil, mcp.NewError(codeRefused, "no sampling here", nil)
			}
		})
		c := startStdio(t, s, nil)
		c.send(stdioInit)
		c.next("the initialize answer")
		c.send(stdioInitialized, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample","arguments":{}}}`)
		l := c.next("the tools/call answer")
		if l.Method != "" || !strings.Contains(l.raw, "no sampling here") {
			t.Fatalf("got %s, want the tool's error result with the refusal (and no sampling request)", l.raw)
		}
		want := []string{"sampling/createMessage session=false"}
		if got := tr.list(); !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// initialize and notifications/initialized go through the receiving
// middleware, and a list_changed
// notification through the sending middleware, once per change.
func TestMiddlewareInitializeAndListChanged(t *testing.T) {
	tr := &trail{}
	s := mcp.NewServer(mcp.Implementation{Name: "test", Version: "1.0.0"}, nil)
	s.AddReceivingMiddleware(tagging(tr, "a"))
	s.AddSendingMiddleware(recordSending(tr))
	c := startStdio(t, s, nil)
	c.send(stdioInit)
	if l := c.next("the initialize answer"); l.Error != nil || l.Result == nil {
		t.Fatalf("initialize: %s", l.raw)
	}
	c.send(stdioInitialized, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	c.next("the ping answer") // notifications/initialized took effect before ping
	mcp.AddTool(s, mcp.Tool{Name: "late", Description: "Added at run time."},
		func(ctx context.Context, req *mcp.Request, _ struct{}) (string, error) { return "", nil })
	if l := c.next("the list_changed"); l.Method != "notifications/tools/list_changed" {
		t.Fatalf("got %s, want notifications/tools/list_changed", l.raw)
	}
	want := []string{"a>initialize", "<a", "a>notifications/initialized", "<a", "a>ping", "<a", "notifications/tools/list_changed session=false"}
	if got := tr.list(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A notification pushed onto a session's GET stream goes through the
// sending middleware with the session's id, and a refusal keeps it off
// the stream and is the caller's error.
func TestSendingMiddlewareNotifySession(t *testing.T) {
	tr := &trail{}
	n := newNode(t, &nodeOptions{Setup: func(s *mcp.Server) {
		s.AddSendingMiddleware(recordSending(tr), func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req *mcp.Request) (json.RawMessage, error) {
				if method == "notifications/blocked" {
					return nil, mcp.NewError(codeRefused, "blocked", nil)
				}
				return next(ctx, method, req)
			}
		})
	}})
	c := session(t, n.url, mcp.LatestLegacyVersion, nil)
	st := getStream(t, c, n.url, "")
	if err := n.h.NotifySession(context.Background(), c.Session, "notifications/blocked", nil); err == nil {
		t.Fatal("a refused notification was sent without an error")
	}
	sentinel(t, n, c, st)
	if got := st.Count("notifications/blocked"); got != 0 {
		t.Fatalf("the stream carried %d refused notifications, want 0", got)
	}
	want := []string{"notifications/blocked session=true", "notifications/test session=true"}
	if got := tr.list(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
