//go:build !linux

package netlinkcfg

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"time"
)

// errUnsupported is returned by everything that needs Linux.
var errUnsupported = newError([]error{errors.ErrUnsupported}, "netlinkcfg: network namespaces, netlink and RDS need Linux, not %s", runtime.GOOS)

// Namespace is a Linux network namespace; on this OS none can be opened.
type Namespace struct{}

// Handle performs netlink operations in one namespace; unavailable on this OS.
type Handle struct{}

// CurrentNamespace is unsupported on this OS.
func CurrentNamespace() (*Namespace, error) { return nil, errUnsupported }

// CreateNamespace is unsupported on this OS.
func CreateNamespace(name string) (*Namespace, error) { return nil, errUnsupported }

// OpenNamespace is unsupported on this OS.
func OpenNamespace(name string) (*Namespace, error) { return nil, errUnsupported }

// Name returns "".
func (ns *Namespace) Name() string { return "" }

// String returns "unsupported".
func (ns *Namespace) String() string { return "unsupported" }

// FD returns -1.
func (ns *Namespace) FD() int { return -1 }

// Do is unsupported on this OS.
func (ns *Namespace) Do(fn func() error) error { return errUnsupported }

// Close does nothing.
func (ns *Namespace) Close() error { return nil }

// Delete is unsupported on this OS.
func (ns *Namespace) Delete() error { return errUnsupported }

// Handle is unsupported on this OS.
func (ns *Namespace) Handle() (*Handle, error) { return nil, errUnsupported }

// Namespace returns nil.
func (h *Handle) Namespace() *Namespace { return nil }

// Close does nothing.
func (h *Handle) Close() {}

// LinkIndex is unsupported on this OS.
func (h *Handle) LinkIndex(name string) (int, error) { return 0, errUnsupported }

// HardwareAddr is unsupported on this OS.
func (h *Handle) HardwareAddr(name string) (net.HardwareAddr, error) { return nil, errUnsupported }

// Links is unsupported on this OS.
func (h *Handle) Links() ([]string, error) { return nil, errUnsupported }

// AddVethPair is unsupported on this OS.
func (h *Handle) AddVethPair(name, peer string, peerNS *Namespace) error { return errUnsupported }

// DeleteLink is unsupported on this OS.
func (h *Handle) DeleteLink(name string) error { return errUnsupported }

// SetUp is unsupported on this OS.
func (h *Handle) SetUp(name string) error { return errUnsupported }

// SetDown is unsupported on this OS.
func (h *Handle) SetDown(name string) error { return errUnsupported }

// MoveToNamespace is unsupported on this OS.
func (h *Handle) MoveToNamespace(name string, ns *Namespace) error { return errUnsupported }

// AddAddr is unsupported on this OS.
func (h *Handle) AddAddr(name string, p netip.Prefix) error { return errUnsupported }

// Addrs is unsupported on this OS.
func (h *Handle) Addrs(name string) ([]netip.Prefix, error) { return nil, errUnsupported }

// AddNeighbor is unsupported on this OS.
func (h *Handle) AddNeighbor(name string, ip netip.Addr, mac net.HardwareAddr) error {
	return errUnsupported
}

// SetNetem is unsupported on this OS.
func (h *Handle) SetNetem(name string, n Netem) error { return errUnsupported }

// NetemOf is unsupported on this OS.
func (h *Handle) NetemOf(name string) (Netem, error) { return Netem{}, errUnsupported }

// Qdisc is unsupported on this OS.
func (h *Handle) Qdisc(name string) (string, error) { return "", errUnsupported }

// ClearQdisc is unsupported on this OS.
func (h *Handle) ClearQdisc(name string) error { return errUnsupported }

// AddRxe is unsupported on this OS.
func (h *Handle) AddRxe(name, netdev string) error { return errUnsupported }

// DeleteRxe is unsupported on this OS.
func (h *Handle) DeleteRxe(name string) error { return errUnsupported }

// RDMALinks is unsupported on this OS.
func (h *Handle) RDMALinks() ([]RDMALink, error) { return nil, errUnsupported }

// RxeLinks is unsupported on this OS.
func (h *Handle) RxeLinks() ([]RDMALink, error) { return nil, errUnsupported }

// RDMAPortState is unsupported on this OS.
func (h *Handle) RDMAPortState(name string, port int) (PortState, error) { return 0, errUnsupported }

// WaitPortActive is unsupported on this OS.
func (h *Handle) WaitPortActive(ctx context.Context, name string, port int) error {
	return errUnsupported
}

// SetupVethPair is unsupported on this OS.
func SetupVethPair(cfg VethPairConfig) (*VethPair, error) { return nil, errUnsupported }

// Close does nothing.
func (p *VethPair) Close() error { return nil }

// SetupRxe is unsupported on this OS.
func SetupRxe(h *Handle, rxeName, netdev string, timeout time.Duration) error {
	return errUnsupported
}

// Sysctl is unsupported on this OS.
func (ns *Namespace) Sysctl(key string) (string, error) { return "", errUnsupported }

// SetSysctl is unsupported on this OS.
func (ns *Namespace) SetSysctl(key, value string) error { return errUnsupported }
