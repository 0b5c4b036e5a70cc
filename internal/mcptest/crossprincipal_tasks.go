package mcptest

import (
	"encoding/json"
	"net/http"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// LegacyTasks runs the battery on a task of 2025-11-25 (the experimental
// tasks on a session): the owner starts tool (a task tool that runs until
// cancelled) as a task on the first node; on every node the intruder, in
// a session of its own, gets it, waits for its result and cancels it by
// its id, each answered exactly as for an id that does not exist, and
// its tasks/list holds nothing of the owner's; the owner's task then
// still runs, and the owner cancels it.
func (b *CrossPrincipal) LegacyTasks(tool string) {
	t := b.T
	t.Helper()
	send := func(c *Client, url, method string, params map[string]any) *Response {
		t.Helper()
		return do(t, c, http.MethodPost, url, b.enc(jsonrpc.Request(jsonrpc.IntID(1), method, params)), nil)
	}
	home := b.URLs[0]
	own := b.client(b.Owner, home)
	own.Initialize("2025-11-25", nil)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	send(own, home, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "task": map[string]any{}}).Result(t, &created)
	id := created.Task.TaskID
	if id == "" {
		t.Fatalf("owner's task: %+v", created)
	}
	b.keep(id, own.Session)
	none := "task-" + randomHex(11)
	for range len(b.URLs) {
		url := b.intruderURL()
		in := b.client(b.Intruder, url)
		in.Initialize("2025-11-25", nil)
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			got := send(in, url, method, map[string]any{"taskId": id})
			want := send(in, url, method, map[string]any{"taskId": none})
			b.Same(method+" of the owner's task", got, want, id)
		}
		var list struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		send(in, url, "tasks/list", map[string]any{}).Result(t, &list)
		b.Intact("the intruder's tasks/list holds nothing of the owner's", len(list.Tasks) == 0)
	}
	var state struct {
		Status string `json:"status"`
	}
	send(own, b.intruderURL(), "tasks/get", map[string]any{"taskId": id}).Result(t, &state)
	b.Intact("the owner's task still runs", state.Status == "working")
	send(own, home, "tasks/cancel", map[string]any{"taskId": id})
}
