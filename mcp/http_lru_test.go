package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/internal/redistest"
	"github.com/mcpcluster/mcpcluster/mcp"
	"github.com/mcpcluster/mcpcluster/mcp/redisbackend"
)

// backends returns a constructor per backend a test runs on: memory, and
// Redis on a server the test starts.
func backends() map[string]func(t *testing.T) *mcp.Backend {
	return map[string]func(t *testing.T) *mcp.Backend{
		"memory": func(t *testing.T) *mcp.Backend {
			be := mcp.NewMemoryBackend()
			t.Cleanup(func() { _ = be.Close() })
			return be
		},
		"redis": func(t *testing.T) *mcp.Backend {
			srv := redistest.Start(t)
			be, err := redisbackend.Open(context.Background(), srv.URL(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = be.Close() })
			return be
		},
	}
}

// The per-session stream bound limits what can be resumed, never what a
// live connection receives: a session with a live GET stream that runs
// many more streaming requests than MaxStreams, several of them at once,
// gets every final response on its POST streams and still gets
// notifications on its GET stream.
func TestStreamBoundNeverCutsLiveConnections(t *testing.T) {
	const maxStreams = 3
	for name, newBackend := range backends() {
		t.Run(name, func(t *testing.T) {
			n := newNode(t, &nodeOptions{HTTP: mcp.HTTPOptions{Backend: newBackend(t), MaxStreams: maxStreams}})
			c := session(t, n.url, mcp.Version20251125, nil)
			get := getStream(t, c, n.url, "")
			sentinel(t, n, c, get)

			// More live streaming requests at once than the bound.
			const live = maxStreams + 3
			var streams []*mcptest.Stream
			for range live {
				st, _ := openLegacy(t, c, n.url, "tools/call", toolCall("block", map[string]any{"progress": true}, true))
				n.probe.waitStarted(t)
				streams = append(streams, st)
			}
			for range live {
				n.probe.release <- struct{}{}
			}
			for i, st := range streams {
				if !st.WaitFor(5*time.Second, finalResponse) {
					t.Fatalf("live POST stream %d of %d got no final response (MaxStreams %d)", i+1, live, maxStreams)
				}
			}
			// And many more, one after the other.
			for i := range 4 * maxStreams {
				st, _ := openLegacy(t, c, n.url, "tools/call", toolCall("gate", map[string]any{"phases": []int{2}}, true))
				if !st.WaitFor(5*time.Second, finalResponse) {
					t.Fatalf("streaming request %d got no final response", i+1)
				}
			}
			select {
			case <-get.Done():
				t.Fatalf("the GET stream was closed: %v", get.Err())
			default:
			}
			sentinel(t, n, c, get)
		})
	}
}
