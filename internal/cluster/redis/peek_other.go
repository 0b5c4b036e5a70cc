//go:build !linux

package redis

import (
	"net"
	"syscall"
)

// rawConn: no socket can be looked at without reading it here.
func rawConn(net.Conn) syscall.RawConn { return nil }

// peek reports no, so Current is false and copies are never used.
func peek(syscall.RawConn) bool { return false }
