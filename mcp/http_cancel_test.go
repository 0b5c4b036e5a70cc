package mcp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

// startBlock posts a call of the probe's block tool on c's session in the
// background; the returned channel yields the response.
func startBlock(t *testing.T, n *node, c *mcptest.Client, streaming bool) (jsonrpc.ID, <-chan *mcptest.Response) {
	t.Helper()
	b, id := encodeRequest(t, c, "tools/call", toolCall("block", map[string]any{"progress": streaming}, streaming))
	done := make(chan *mcptest.Response, 1)
	go func() {
		resp, _ := c.PostRaw(context.Background(), n.url, b, nil, nil)
		done <- resp
	}()
	if got := n.probe.waitStarted(t); got != id.String() {
		t.Fatalf("started %s, want %s", got, id)
	}
	return id, done
}

// notifications/cancelled on a session cancels the running handler's
// context (whether its answer is JSON or a stream); the answer carries no
// result. A cancellation sent on another session does nothing.
func TestLegacyCancelledNotification(t *testing.T) {
	for _, v := range mcp.LegacyVersions {
		for _, streaming := range []bool{false, true} {
			name := v + "/json"
			if streaming {
				name = v + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				n := newNode(t, nil)
				c := session(t, n.url, v, nil)
				other := session(t, n.url, v, nil)

				id, done := startBlock(t, n, c, streaming)
				// Another session cancelling the same id is ignored.
				if st := other.Notify("notifications/cancelled", map[string]any{"requestId": id}); st != http.StatusAccepted {
					t.Fatalf("foreign cancellation: got %d, want 202", st)
				}
				// A cancellation of a second call, on the right session,
				// is delivered after the foreign one.
				id2, done2 := startBlock(t, n, c, streaming)
				if st := c.Notify("notifications/cancelled", map[string]any{"requestId": id2, "reason": "test"}); st != http.StatusAccepted {
					t.Fatalf("cancellation: got %d, want 202", st)
				}
				if got := n.probe.waitCancelled(t, 5*time.Second); got != id2.String() {
					t.Fatalf("cancelled %s, want %s", got, id2)
				}
				select {
				case resp := <-done2:
					if resp == nil {
						t.Fatal("the cancelled call's POST failed")
					}
					// The response must end; it carries no result, and
					// if it carries an error, it says the request was
					// cancelled.
					if f := resp.Final(); f != nil && (f.Error == nil || f.Error.Code != jsonrpc.CodeCancelled) {
						t.Fatalf("a cancelled request got %+v, want no result", f)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the cancelled call's POST did not end")
				}
				// The first call was not cancelled by the other session.
				n.probe.release <- struct{}{}
				resp := <-done
				if got := resultText(t, resp); got != "released" {
					t.Fatalf("first call: got %q, want released", got)
				}
			})
		}
	}
}

// On 2026-07-28 a client disconnect cancels the request: the handler's
// context ends whether the answer was still pending JSON or a stream.
func TestModernDisconnectCancels(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		name := "json"
		if streaming {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			n := newNode(t, nil)
			c := mcptest.New(t, n.url)
			params := modernParams(toolCall("block", map[string]any{"progress": streaming}, streaming), nil)
			b, id := encodeRequest(t, c, "tools/call", params)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := c.PostRaw(ctx, n.url, b, modernMod("tools/call", params, nil), nil)
				done <- err
			}()
			if got := n.probe.waitStarted(t); got != id.String() {
				t.Fatalf("started %s, want %s", got, id)
			}
			cancel() // the client disconnects
			if got := n.probe.waitCancelled(t, 5*time.Second); got != id.String() {
				t.Fatalf("cancelled %s, want %s", got, id)
			}
			<-done
		})
	}
}
