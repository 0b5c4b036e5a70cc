//go:build linux

package redis

import (
	"errors"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConn returns the socket under c (nil when there is none to peek).
func rawConn(c net.Conn) syscall.RawConn {
	for {
		u, ok := c.(interface{ NetConn() net.Conn }) // TLS
		if !ok {
			break
		}
		c = u.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// peek reports whether socket rc is open and nothing read from it says
// otherwise: recv with MSG_PEEK|MSG_DONTWAIT under RawConn.Control,
// which neither waits nor takes the descriptor's read lock (the blocked
// reader holds it). EAGAIN (nothing unread) is yes; so are unread bytes
// on a TCP connection still established, since the peer's FIN or RST
// (Redis gone) would have moved it out of that state although the
// bytes before it hide them from recv. 0 bytes (EOF), an error (a
// closed descriptor), or unread bytes on any other socket (a unix
// socket, whose end cannot be seen behind them) are no.
//
// Unread bytes alone do not make a copy unsafe: they are messages the
// hub has not dispatched yet, published after the tick answer that
// keeps the hub fresh (answers arrive in order), so younger than
// cluster.BusFresh. Refusing them cost a busy node most of its copies:
// every session's end publishes, so under churn the socket often holds
// a message, and each miss is a round trip.
func peek(rc syscall.RawConn) bool {
	p := peekers.Get().(*peeker)
	p.idle = false
	err := rc.Control(p.fn)
	idle := err == nil && p.idle
	peekers.Put(p)
	return idle
}

// peeker holds what one peek needs, so that it allocates nothing.
type peeker struct {
	buf  [1]byte
	idle bool
	fn   func(fd uintptr) // p.control
}

func (p *peeker) control(fd uintptr) {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		p.idle = true
	case err == nil && n > 0:
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		p.idle = err == nil && info.State == tcpEstablished
	}
}

// tcpEstablished is TCP_ESTABLISHED of the kernel's tcp_states.h, the
// State of a TCP_INFO answer.
const tcpEstablished = 1

var peekers = sync.Pool{New: func() any {
	p := new(peeker)
	p.fn = p.control
	return p
}}
