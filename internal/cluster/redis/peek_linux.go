//go:build linux

package redis

import (
	"errors"
	"net"
	"sync"
	"syscall"
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

// peek reports whether socket rc is open with nothing unread: recv with
// MSG_PEEK|MSG_DONTWAIT under RawConn.Control, which neither waits nor
// takes the descriptor's read lock (the blocked reader holds it). EAGAIN
// is the only yes; 0 bytes (EOF), unread bytes, or an error (a closed
// descriptor) are no.
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
	_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	p.idle = errors.Is(err, syscall.EAGAIN)
}

var peekers = sync.Pool{New: func() any {
	p := new(peeker)
	p.fn = p.control
	return p
}}
