package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/clustertest"
	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
	"github.com/mcpcluster/mcpcluster/internal/mcptest"
	"github.com/mcpcluster/mcpcluster/mcp"
)

var sampleCaps = map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}}

// answerSampling answers sampling/createMessage with the prompt reversed.
func answerSampling(m *jsonrpc.Message) *jsonrpc.Message {
	if m.Method != "sampling/createMessage" {
		return nil
	}
	var p struct {
		Messages []struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(m.Params, &p)
	r, _ := jsonrpc.Response(m.ID, map[string]any{"role": "assistant", "model": "test", "content": map[string]any{"type": "text", "text": "re:" + p.Messages[0].Content.Text}})
	return r
}

// Flow 3: a server→client request issued on one node is resolved by the
// reply landing on another, for many sessions at once.
func TestCrossNodeSampling(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Random: true})
	const sessions = 50
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := mcptest.New(t, c.URL())
			cl.Initialize(mcp.Version20251125, sampleCaps)
			prompt := fmt.Sprintf("prompt-%d", i)
			resp := cl.Call("tools/call", map[string]any{"name": "sample", "arguments": map[string]any{"prompt": prompt}}, answerSampling)
			var res mcp.CallToolResult
			f := resp.Final()
			if f == nil || f.Error != nil || json.Unmarshal(f.Result, &res) != nil || len(res.Content) == 0 {
				errs <- fmt.Errorf("session %d: bad final response %+v", i, f)
				return
			}
			if got := res.Content[0].Text; got != "re:"+prompt {
				errs <- fmt.Errorf("session %d: got %q, want %q", i, got, "re:"+prompt)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("sessions did not complete within 60s")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	hits := c.Router.Hits()
	if len(hits) != 3 {
		t.Errorf("router reached %d nodes, want 3: %v", len(hits), hits)
	}
	_ = context.Background
}
