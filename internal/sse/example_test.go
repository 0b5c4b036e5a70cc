package sse_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mcpcluster/mcpcluster/internal/sse"
)

func ExampleWrite() {
	id := sse.EventID{Stream: "k3x9q2m7abcdwxyz", Seq: 0}
	// A priming event gives the client a Last-Event-ID to resume from.
	var priming strings.Builder
	sse.Write(&priming, sse.Event{ID: id.String(), Retry: 2 * time.Second})
	fmt.Printf("%q\n", priming.String())

	id.Seq++
	sse.Write(os.Stdout, sse.Event{ID: id.String(), Name: "message", Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)})
	sse.WriteComment(os.Stdout, "keep-alive")
	// Output:
	// "id: k3x9q2m7abcdwxyz_0\nretry: 2000\ndata: \n\n"
	// id: k3x9q2m7abcdwxyz_1
	// event: message
	// data: {"jsonrpc":"2.0","id":1,"result":{}}
	//
	// : keep-alive
}

func ExampleReader() {
	r := sse.NewReader(strings.NewReader("id: s_1\ndata: a\ndata: b\n\n: ping\n\n"), 0)
	ev, _ := r.Next()
	fmt.Printf("%s %q\n", ev.ID, ev.Data)
	_, err := r.Next()
	fmt.Println(err, r.Comments())
	// Output:
	// s_1 "a\nb"
	// EOF 1
}
