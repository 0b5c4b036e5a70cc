//go:build linux

package redis

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// peekAfter reports what peek says of the reading end of a connection
// once the writing end has sent data and then, when closed is set,
// closed. It reads nothing.
func peekAfter(t *testing.T, network, addr string, data []byte, closed bool) bool {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	reader, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	writer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer writer.Close()
	if len(data) > 0 {
		if _, err := writer.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if closed {
		writer.Close()
	}
	// Let the kernel deliver what was sent (loopback: at once).
	time.Sleep(20 * time.Millisecond)
	rc := rawConn(reader)
	if rc == nil {
		t.Fatalf("no raw connection under a %s connection", network)
	}
	return peek(rc)
}

// peek says yes of an open connection with nothing unread, and of an
// established TCP connection with unread bytes (messages the hub has not
// dispatched yet); no once the peer closed, whether or not bytes wait
// before its FIN, and no of unread bytes on a unix socket, whose end
// cannot be seen behind them.
func TestPeek(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	for _, tc := range []struct {
		name, network, addr string
		data                []byte
		closed, want        bool
	}{
		{"tcp idle", "tcp", "127.0.0.1:0", nil, false, true},
		{"tcp unread", "tcp", "127.0.0.1:0", []byte("*3\r\n$7\r\nmessage\r\n"), false, true},
		{"tcp closed", "tcp", "127.0.0.1:0", nil, true, false},
		{"tcp unread then closed", "tcp", "127.0.0.1:0", []byte("*3\r\n$7\r\nmessage\r\n"), true, false},
		{"unix idle", "unix", sock + "1", nil, false, true},
		{"unix unread", "unix", sock + "2", []byte("x"), false, false},
		{"unix closed", "unix", sock + "3", nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := peekAfter(t, tc.network, tc.addr, tc.data, tc.closed); got != tc.want {
				t.Errorf("peek = %v, want %v", got, tc.want)
			}
		})
	}
}
