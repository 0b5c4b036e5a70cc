package main

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/mcpcluster/mcpcluster/internal/jsonrpc"
)

// sharedSession is a legacy session that several workers use at once
// (--sessions): worker i uses session i mod N, so the session has up to
// -c/N requests in flight. The first of its workers to be set up opens
// it; the last to let go of it (at teardown, or when its setup fails
// later on) ends it. For sampling it also holds the session's one GET
// stream, and hands each server request arriving there to the
// operation it belongs to: each operation tags its prompt, which the
// sampling request carries back.
type sharedSession struct {
	open  sync.Once
	sess  *session
	err   error
	users atomic.Int64

	openGet  sync.Once
	getErr   error
	closeGet func()

	mu      sync.Mutex
	waiting map[string]chan incoming // by operation tag
	getDone bool                     // the GET stream ended
}

// sharedFor returns the session worker n shares, or nil when the
// workers do not share sessions.
func (r *runner) sharedFor(n int) *sharedSession {
	if len(r.shared) == 0 {
		return nil
	}
	return r.shared[n%len(r.shared)]
}

// releaseShared ends the worker's use of its shared session; the last
// worker to let go closes its GET stream and ends it.
func (w *worker) releaseShared(ctx context.Context) {
	sh := w.shared
	w.shared = nil
	if sh.users.Add(-1) > 0 {
		return
	}
	if sh.closeGet != nil {
		sh.closeGet()
	}
	w.r.endSession(ctx, sh.sess)
}

// tagPrefix marks an operation's tag in a sampling prompt of a shared
// session: "[mcpbench-op 17]".
const tagPrefix = "[mcpbench-op "

// opTag finds the operation tag in a server request's params ("" when
// there is none).
func opTag(params json.RawMessage) string {
	i := bytes.Index(params, []byte(tagPrefix))
	if i < 0 {
		return ""
	}
	rest := params[i+len(tagPrefix):]
	j := bytes.IndexByte(rest, ']')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// register makes the server requests tagged tag reach the returned
// channel, which is closed when the GET stream ends.
func (sh *sharedSession) register(tag string) chan incoming {
	ch := make(chan incoming, 4)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.getDone {
		close(ch)
		return ch
	}
	if sh.waiting == nil {
		sh.waiting = map[string]chan incoming{}
	}
	sh.waiting[tag] = ch
	return ch
}

func (sh *sharedSession) unregister(tag string) {
	sh.mu.Lock()
	delete(sh.waiting, tag)
	sh.mu.Unlock()
}

// route hands a server request to the operation its tag names; false
// when none waits for it.
func (sh *sharedSession) route(in incoming) bool {
	tag := opTag(in.msg.Params)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ch := sh.waiting[tag]
	if ch == nil {
		return false
	}
	select {
	case ch <- in:
		return true
	default:
		return false
	}
}

// endGet closes the channels of the waiting operations: the GET stream
// ended.
func (sh *sharedSession) endGet() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.getDone = true
	for _, ch := range sh.waiting {
		close(ch)
	}
	sh.waiting = nil
}

// handOn passes a server request of a shared session to the operation
// it belongs to; one that no operation waits for any more (it failed or
// timed out) is counted, and a sampling request among them answered
// anyway, so that the server's handler does not wait for nothing.
func (sh *sharedSession) handOn(r *runner, in incoming) {
	if sh.route(in) {
		return
	}
	r.count("sampling_unrouted", 1, true)
	if in.msg.Method != "sampling/createMessage" {
		return
	}
	cl, sess, timeout := r.cl, sh.sess, r.cfg.timeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		reply, _ := jsonrpc.Response(in.msg.ID, sampleResult(sampleAnswer))
		rb, _ := jsonrpc.Encode(reply)
		_ = cl.notify(ctx, cl.urls[cl.pick()], sess, rb, "")
	}()
}
