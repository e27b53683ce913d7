// Package sendlink gives package rdmaops a send that skips the layers of
// rdssock.Conn.WriteMsgContext in the common case, without making it
// public API. Package rdssock fills the function in its init.
package sendlink

import (
	"net/netip"
	"unsafe"
)

// Try makes one attempt at sending b, with control data oob that
// registers no memory, to to over conn (an *rdssock.Conn): a sendmsg
// with MSG_DONTWAIT when the socket needs no warm-up for to and no other
// send holds its send state. It reports whether the kernel took the
// message; if not, nothing was sent and the caller sends through
// WriteMsgContext, which waits, retries and reports every error.
var Try func(conn unsafe.Pointer, b, oob []byte, to netip.AddrPort) bool
