//go:build linux

// Package rawrds is a minimal AF_RDS socket made of raw golang.org/x/sys/unix
// calls. The harness's own tests use it so that they prove the VM works
// without depending on the library under test.
package rawrds

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Kernel ABI values from linux/rds.h.
const (
	SolRDS         = 276
	SoRDSTransport = 8

	TransIB   = 0
	TransTCP  = 2
	TransLoop = 3 // not named in the uapi header
	TransNone = ^uint32(0)
)

// Socket is an AF_RDS SOCK_SEQPACKET socket.
type Socket struct{ fd int }

// Open creates a socket in the calling thread's network namespace.
func Open() (*Socket, error) {
	fd, err := unix.Socket(unix.AF_RDS, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_RDS, SOCK_SEQPACKET): %w", err)
	}
	return &Socket{fd: fd}, nil
}

// FD returns the file descriptor.
func (s *Socket) FD() int { return s.fd }

// Close closes the socket.
func (s *Socket) Close() error { return unix.Close(s.fd) }

// Sockaddr converts an address and port to a unix.Sockaddr.
func Sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// AddrPort converts a unix.Sockaddr back.
func AddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// Bind binds to ap (port 0: the kernel picks one) and returns the bound
// address.
func (s *Socket) Bind(ap netip.AddrPort) (netip.AddrPort, error) {
	if err := unix.Bind(s.fd, Sockaddr(ap)); err != nil {
		return netip.AddrPort{}, fmt.Errorf("bind %s: %w", ap, err)
	}
	sa, err := unix.Getsockname(s.fd)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockname: %w", err)
	}
	return AddrPort(sa), nil
}

// Transport reads SO_RDS_TRANSPORT.
func (s *Socket) Transport() (uint32, error) {
	v, err := unix.GetsockoptInt(s.fd, SolRDS, SoRDSTransport)
	if err != nil {
		return 0, fmt.Errorf("getsockopt SO_RDS_TRANSPORT: %w", err)
	}
	return uint32(v), nil
}

// SendTo sends one message (possibly empty) to ap.
func (s *Socket) SendTo(p []byte, ap netip.AddrPort) error {
	if err := unix.Sendto(s.fd, p, 0, Sockaddr(ap)); err != nil {
		return fmt.Errorf("sendto %s: %w", ap, err)
	}
	return nil
}

// ErrTimeout is returned by RecvFrom when nothing arrived in time.
var ErrTimeout = errors.New("rawrds: receive timed out")

// RecvFrom waits up to d for one message and returns its length and source.
func (s *Socket) RecvFrom(p []byte, d time.Duration) (int, netip.AddrPort, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, netip.AddrPort{}, ErrTimeout
		}
		fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, netip.AddrPort{}, fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			continue
		}
		m, from, err := unix.Recvfrom(s.fd, p, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, netip.AddrPort{}, fmt.Errorf("recvfrom: %w", err)
		}
		return m, AddrPort(from), nil
	}
}
