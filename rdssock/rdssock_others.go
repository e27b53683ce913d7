//go:build !linux

package rdssock

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"
)

func notLinux() error {
	return &net.OpError{Op: "socket", Net: network, Err: &osError{goos: runtime.GOOS}}
}

type osError struct{ goos string }

func (e *osError) Error() string { return "RDS sockets need Linux; this is " + e.goos }

func (e *osError) Unwrap() error { return ErrUnavailable }

// Conn is an RDS socket. On this operating system every method fails.
type Conn struct{}

// Socket fails: RDS needs Linux.
func Socket(cfg *Config) (*Conn, error) { return nil, notLinux() }

// Listen fails: RDS needs Linux.
func Listen(addr netip.AddrPort, cfg *Config) (*Conn, error) { return nil, notLinux() }

// Bind fails: RDS needs Linux.
func (c *Conn) Bind(addr netip.AddrPort) error { return notLinux() }

// Connect fails: RDS needs Linux.
func (c *Conn) Connect(to netip.AddrPort) error { return notLinux() }

// Close fails: RDS needs Linux.
func (c *Conn) Close() error { return notLinux() }

// LocalAddr fails: RDS needs Linux.
func (c *Conn) LocalAddr() net.Addr { return nil }

// LocalAddrPort fails: RDS needs Linux.
func (c *Conn) LocalAddrPort() netip.AddrPort { return netip.AddrPort{} }

// RemoteAddr fails: RDS needs Linux.
func (c *Conn) RemoteAddr() net.Addr { return nil }

// SetDeadline fails: RDS needs Linux.
func (c *Conn) SetDeadline(t time.Time) error { return notLinux() }

// SetReadDeadline fails: RDS needs Linux.
func (c *Conn) SetReadDeadline(t time.Time) error { return notLinux() }

// SetWriteDeadline fails: RDS needs Linux.
func (c *Conn) SetWriteDeadline(t time.Time) error { return notLinux() }

// SyscallConn fails: RDS needs Linux.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return nil, notLinux() }

// ReadMsg fails: RDS needs Linux.
func (c *Conn) ReadMsg(b, oob []byte) (n, oobn, flags int, from netip.AddrPort, err error) {
	return 0, 0, 0, netip.AddrPort{}, notLinux()
}

// ReadMsgContext fails: RDS needs Linux.
func (c *Conn) ReadMsgContext(ctx context.Context, b, oob []byte, flags int) (n, oobn, rflags int, from netip.AddrPort, err error) {
	return 0, 0, 0, netip.AddrPort{}, notLinux()
}

// WriteMsg fails: RDS needs Linux.
func (c *Conn) WriteMsg(b, oob []byte, to netip.AddrPort) (int, error) { return 0, notLinux() }

// WriteMsgContext fails: RDS needs Linux.
func (c *Conn) WriteMsgContext(ctx context.Context, b, oob []byte, to netip.AddrPort, flags int) (int, error) {
	return 0, notLinux()
}

// ReadFrom fails: RDS needs Linux.
func (c *Conn) ReadFrom(p []byte) (int, net.Addr, error) { return 0, nil, notLinux() }

// WriteTo fails: RDS needs Linux.
func (c *Conn) WriteTo(p []byte, addr net.Addr) (int, error) { return 0, notLinux() }

// Write fails: RDS needs Linux.
func (c *Conn) Write(b []byte) (int, error) { return 0, notLinux() }

// Transport fails: RDS needs Linux.
func (c *Conn) Transport() (Transport, error) { return TransportNone, notLinux() }

// SetRecvErr fails: RDS needs Linux.
func (c *Conn) SetRecvErr(on bool) error { return notLinux() }

// SetBusyPoll fails: RDS needs Linux.
func (c *Conn) SetBusyPoll(d time.Duration) error { return notLinux() }

// SetReadBuffer fails: RDS needs Linux.
func (c *Conn) SetReadBuffer(bytes int) error { return notLinux() }

// SetWriteBuffer fails: RDS needs Linux.
func (c *Conn) SetWriteBuffer(bytes int) error { return notLinux() }

// ReadBuffer fails: RDS needs Linux.
func (c *Conn) ReadBuffer() (int, error) { return 0, notLinux() }

// WriteBuffer fails: RDS needs Linux.
func (c *Conn) WriteBuffer() (int, error) { return 0, notLinux() }

// CancelSentTo fails: RDS needs Linux.
func (c *Conn) CancelSentTo(dst netip.AddrPort) error { return notLinux() }

// SetTOS fails: RDS needs Linux.
func (c *Conn) SetTOS(tos uint8) error { return notLinux() }

// TOS fails: RDS needs Linux.
func (c *Conn) TOS() (uint8, error) { return 0, notLinux() }

// ReadBatch fails: RDS needs Linux.
func (c *Conn) ReadBatch(ctx context.Context, ms []Message, flags int) (int, error) {
	return 0, notLinux()
}

// WriteBatch fails: RDS needs Linux.
func (c *Conn) WriteBatch(ctx context.Context, ms []Message, flags int) (int, error) {
	return 0, notLinux()
}

// WarmUpTimeouts returns 0: RDS needs Linux.
func (c *Conn) WarmUpTimeouts() uint64 { return 0 }

// CongestedSends returns 0: RDS needs Linux.
func (c *Conn) CongestedSends() uint64 { return 0 }

// WarmUp fails: RDS needs Linux.
func WarmUp(ctx context.Context, local, peer netip.Addr, cfg *Config) error { return notLinux() }
