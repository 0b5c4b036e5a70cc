package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// extensionTasks is the 2026-07-28 tasks extension.
const extensionTasks = "io.modelcontextprotocol/tasks"

// taskState is what the client reads of a task, either era: the
// 2026-07-28 CreateTaskResult and tasks/get answer are flat, the
// 2025-11-25 CreateTaskResult wraps the task.
type taskState struct {
	TaskID string          `json:"taskId"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Task   *taskState      `json:"task"`
}

// taskWorker runs the demo's echo_task as a durable task, the
// 2026-07-28 extension and the 2025-11-25 experimental tasks in turn:
// each is created on one node and, after a pause of up to 6 s (the time
// a node's replacement takes), read to its result on a node of the other
// release when one is ready (the balancer's otherwise). A task whose
// result is never read, or reads wrong, is failed.
func (c *client) taskWorker(ctx context.Context) {
	var s *session
	for i := 0; ctx.Err() == nil; i++ {
		legacy := i%2 == 1
		if legacy && s == nil {
			var err error
			if s, err = c.initialize(ctx); err != nil {
				return
			}
		}
		var sess *session
		if legacy {
			sess = s
		}
		text := "task " + randomText()
		id, rel, how := c.createTask(ctx, sess, text)
		if id == "" {
			if how == "404" {
				s = nil // the session is gone: open another
			}
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		c.st.add(func(s *stats) { s.tasksCreated++ })
		sleep(ctx, 500*time.Millisecond+rand.N(5500*time.Millisecond))
		c.readTask(sess, id, rel, text)
	}
}

func randomText() string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 8)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}

// taskMeta is the 2026-07-28 request metadata with the tasks extension.
func taskMeta() map[string]any {
	m := modernMeta()
	m["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"sampling": map[string]any{}, "extensions": map[string]any{extensionTasks: map[string]any{}}}
	return m
}

// rpc sends one request and returns its response, or how it failed
// ("transport error", the HTTP status and JSON-RPC code).
func (c *client) rpc(ctx context.Context, s *session, method, name string, params map[string]any) (*jsonrpc.Message, string) {
	var id int64
	if s != nil {
		id = s.newID()
	} else {
		id = rand.Int64N(1 << 40)
		params["_meta"] = taskMeta()
	}
	msg, _ := jsonrpc.Request(jsonrpc.IntID(id), method, params)
	resp, err := c.hc.Do(c.newRequest(ctx, http.MethodPost, s, encode(msg), method, name))
	if err != nil {
		return nil, "transport error"
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, errorKey(resp)
	}
	if final := c.read(ctx, s, id, resp, newTracker()); final != nil {
		return final, ""
	}
	return nil, "no response"
}

// taskOf decodes a task from a result.
func taskOf(m *jsonrpc.Message) *taskState {
	var st taskState
	if m == nil || m.Error != nil || json.Unmarshal(m.Result, &st) != nil {
		return nil
	}
	if st.Task != nil {
		return st.Task
	}
	return &st
}

// createTask starts echo_task as a task on a ready node (any node when
// the scenario tracks no releases), retrying while the cluster refuses
// for up to 5 s, and returns its id and the creating node's release.
func (c *client) createTask(ctx context.Context, s *session, text string) (id, rel, how string) {
	params := func() map[string]any {
		p := map[string]any{"name": "echo_task", "arguments": map[string]any{"text": text}}
		if s != nil {
			p["task"] = map[string]any{"ttl": 300000}
		}
		return p
	}
	deadline := time.Now().Add(5 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		to := c
		if c.rel != nil {
			var node string
			node, rel, _ = c.rel.pick("")
			to = c.at(node)
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, how := to.rpc(rctx, s, "tools/call", "echo_task", params())
		cancel()
		if st := taskOf(m); st != nil && st.TaskID != "" {
			return st.TaskID, rel, ""
		}
		if len(how) >= 3 && how[:3] == "404" {
			return "", "", "404"
		}
		if m != nil && m.Error != nil {
			c.st.note("task not created: %d %s", m.Error.Code, m.Error.Message)
			return "", "", "refused"
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return "", "", "not created"
}

// readTask polls the task until it is completed and reads its result,
// on a node of the other release than created (when one is ready), for
// up to the call bound. It counts the task done when the result is the
// text, and across releases when the read that got it ran on the other
// release.
func (c *client) readTask(s *session, id, created, text string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.bound)
	defer cancel()
	last, why := "", "not completed within the bound"
	ok := false
	for ctx.Err() == nil {
		to, rel := c, ""
		if c.rel != nil {
			var node string
			node, rel, _ = c.rel.pick(created)
			to = c.at(node)
		}
		m, how := to.rpc(ctx, s, "tasks/get", id, map[string]any{"taskId": id})
		if m != nil && m.Error != nil {
			why = "tasks/get answered " + m.Error.Message
			break
		}
		st := taskOf(m)
		if st == nil || st.Status == "working" {
			if how != "" {
				why = "tasks/get: " + how
			}
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		if st.Status != "completed" {
			why = "the task ended " + st.Status
			break
		}
		if s == nil { // 2026-07-28: the result comes with the task
			last, ok = rel, bytes.Contains(st.Result, []byte(text))
			why = "the result is not the text: " + string(st.Result)
			break
		}
		res, how := to.rpc(ctx, s, "tasks/result", id, map[string]any{"taskId": id})
		if res == nil { // refused or cut: read it again
			why = "tasks/result: " + how
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		last, ok = rel, res.Error == nil && bytes.Contains(res.Result, []byte(text))
		why = "tasks/result answered " + string(res.Result)
		if res.Error != nil {
			why = "tasks/result answered " + res.Error.Message
		}
		break
	}
	c.st.add(func(st *stats) {
		if ok {
			st.tasksDone++
		} else {
			st.tasksFailed++
		}
		if last != "" && created != "" && last != created {
			k := crossKey(created, last)
			st.cross.tasks[k]++
			if ok {
				st.cross.tasksOK[k]++
			}
		}
	})
	if !ok {
		c.st.note("task %s (created on %s): %.200s", id, created, why)
	}
}
