//go:build linux

package rdssock

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockaddrBuf holds either a sockaddr_in or a sockaddr_in6 as the kernel
// reads and writes them, without going through unix.Sockaddr (which
// allocates).
type sockaddrBuf struct {
	raw unix.RawSockaddrInet6 // 28 bytes; a sockaddr_in fits in its prefix
}

// put encodes ap and returns the length to pass to the kernel, or an error
// text when ap cannot be expressed.
func (s *sockaddrBuf) put(ap netip.AddrPort) (uint32, error) {
	a := ap.Addr()
	if !a.IsValid() {
		return 0, errInvalidAddr
	}
	port := ap.Port()
	if !wantV6(a) {
		in4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&s.raw))
		*in4 = unix.RawSockaddrInet4{Family: unix.AF_INET}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&in4.Port))[:], port)
		in4.Addr = a.Unmap().As4()
		return unix.SizeofSockaddrInet4, nil
	}
	s.raw = unix.RawSockaddrInet6{Family: unix.AF_INET6}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s.raw.Port))[:], port)
	s.raw.Addr = a.As16()
	if z := a.Zone(); z != "" {
		id, err := zoneIndex(z)
		if err != nil {
			return 0, err
		}
		s.raw.Scope_id = id
	}
	return unix.SizeofSockaddrInet6, nil
}

// inet4 decodes a sockaddr_in that the kernel wrote (n bytes), without a
// call; ok is false for anything else (getZone decodes the rest).
func (s *sockaddrBuf) inet4(n uint32) (ap netip.AddrPort, ok bool) {
	if s.raw.Family != unix.AF_INET || n < unix.SizeofSockaddrInet4 {
		return netip.AddrPort{}, false
	}
	in4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&s.raw))
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&in4.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), port), true
}

// get decodes what the kernel wrote; n is the length it reported.
func (s *sockaddrBuf) get(n uint32) netip.AddrPort { return s.getZone(n, false) }

// getZone is get with a choice of zone: the interface index as a number
// when numericZone is set (for sockets in another network namespace, whose
// interface names this process cannot look up), else the interface name.
func (s *sockaddrBuf) getZone(n uint32, numericZone bool) netip.AddrPort {
	if ap, ok := s.inet4(n); ok {
		return ap
	}
	if s.raw.Family != unix.AF_INET6 || n < unix.SizeofSockaddrInet6 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s.raw.Port))[:])
	a := netip.AddrFrom16(s.raw.Addr)
	if s.raw.Scope_id != 0 {
		if numericZone {
			a = a.WithZone(zoneNumber(s.raw.Scope_id))
		} else {
			a = a.WithZone(zoneName(s.raw.Scope_id))
		}
	}
	return netip.AddrPortFrom(a, port)
}

// Zone names are cached so that receiving from a link-local peer does not
// allocate per message.
var zoneCache sync.Map // uint32 -> string

func zoneName(index uint32) string {
	if v, ok := zoneCache.Load(index); ok {
		return v.(string)
	}
	name := strconv.FormatUint(uint64(index), 10)
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		name = ifi.Name
	}
	zoneCache.Store(index, name)
	return name
}

// numberCache holds zone indexes as decimal strings, for the same reason.
var numberCache sync.Map // uint32 -> string

func zoneNumber(index uint32) string {
	if v, ok := numberCache.Load(index); ok {
		return v.(string)
	}
	s := strconv.FormatUint(uint64(index), 10)
	numberCache.Store(index, s)
	return s
}

func zoneIndex(zone string) (uint32, error) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, &zoneError{zone: zone}
	}
	return uint32(ifi.Index), nil
}

// toSockaddr converts ap for the calls that take a unix.Sockaddr (bind,
// connect); they are not on the hot path.
func toSockaddr(ap netip.AddrPort) (unix.Sockaddr, error) {
	a := ap.Addr()
	if !a.IsValid() {
		return nil, errInvalidAddr
	}
	if !wantV6(a) {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.Unmap().As4()}, nil
	}
	sa := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	if z := a.Zone(); z != "" {
		id, err := zoneIndex(z)
		if err != nil {
			return nil, err
		}
		sa.ZoneId = id
	}
	return sa, nil
}

// fromSockaddr converts what getsockname returns, with
// the zone choice of getZone: a socket in another network namespace gets
// its zone as the index, since looking the name up here would name an
// unrelated interface, or none.
func fromSockaddr(sa unix.Sockaddr, numericZone bool) netip.AddrPort {
	switch v := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(v.Addr), uint16(v.Port))
	case *unix.SockaddrInet6:
		a := netip.AddrFrom16(v.Addr)
		switch {
		case v.ZoneId == 0:
		case numericZone:
			a = a.WithZone(zoneNumber(v.ZoneId))
		default:
			a = a.WithZone(zoneName(v.ZoneId))
		}
		return netip.AddrPortFrom(a, uint16(v.Port))
	}
	return netip.AddrPort{}
}
