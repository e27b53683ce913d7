package rdssock

import (
	"net/netip"
)

// network is the name reported by Addr.Network and in errors.
const network = "rds"

// Addr is an RDS endpoint: an IP address (IPv4, or IPv6 with an optional
// zone for link-local addresses) and a 16-bit RDS port. It implements
// net.Addr.
type Addr struct {
	AddrPort netip.AddrPort
}

// Network returns "rds".
func (a *Addr) Network() string { return network }

// String returns the address in host:port form, for example
// "10.0.0.1:4000" or "[fe80::1%eth0]:4000".
func (a *Addr) String() string {
	if a == nil {
		return "<nil>"
	}
	return a.AddrPort.String()
}

// addrPortOf converts a net.Addr accepted by WriteTo into a netip.AddrPort.
func addrPortOf(a interface{ String() string }) (netip.AddrPort, bool) {
	switch v := a.(type) {
	case *Addr:
		if v == nil {
			return netip.AddrPort{}, false
		}
		return v.AddrPort, true
	case interface{ AddrPort() netip.AddrPort }: // *net.UDPAddr, *net.TCPAddr
		return v.AddrPort(), true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap, err == nil
}

// wantV6 reports whether ap needs a sockaddr_in6: IPv6 addresses other than
// IPv4-mapped ones (which RDS treats as IPv4).
func wantV6(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
