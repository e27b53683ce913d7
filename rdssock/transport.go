package rdssock

import "fmt"

// Transport names an RDS transport: the kernel module that carries the
// datagrams of a bound socket.
//
// The zero value, TransportAuto, lets bind choose: the kernel tries
// InfiniBand/RoCE first and falls back to TCP. Loopback addresses (127/8 and
// ::1) always use the loopback transport.
type Transport int

// Transports. The numeric values are this package's own; use Transport.Kernel
// for the value of SO_RDS_TRANSPORT.
const (
	// TransportAuto leaves the choice to bind.
	TransportAuto Transport = iota
	// TransportIB is RDS over InfiniBand or RoCE (Soft-RoCE included),
	// module rds_rdma.
	TransportIB
	// TransportTCP is RDS over TCP, module rds_tcp.
	TransportTCP
	// TransportLoop is the in-kernel loopback transport, used for local
	// addresses. linux/rds.h has no name for it; the kernel reports 3.
	TransportLoop
	// TransportIWARP is the retired iWARP transport (RDS_TRANS_IWARP, "gap"
	// in the header). No current kernel provides it.
	TransportIWARP
	// TransportNone is what an unbound socket reports.
	TransportNone
)

// Kernel values of SO_RDS_TRANSPORT.
const (
	kernelTransIB    = 0
	kernelTransGap   = 1
	kernelTransTCP   = 2
	kernelTransLoop  = 3
	kernelTransNone  = -1 // RDS_TRANS_NONE is (~0) read as an int
	kernelTransCount = 3
)

// String returns the transport's name as the kernel prints it in
// RDS_INFO_CONNECTIONS ("infiniband", "tcp", "loopback").
func (t Transport) String() string {
	switch t {
	case TransportAuto:
		return "auto"
	case TransportIB:
		return "infiniband"
	case TransportTCP:
		return "tcp"
	case TransportLoop:
		return "loopback"
	case TransportIWARP:
		return "iwarp"
	case TransportNone:
		return "none"
	}
	if t >= unknownTransportBase {
		return fmt.Sprintf("kernel-transport-%d", int(t-unknownTransportBase))
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// unknownTransportBase offsets SO_RDS_TRANSPORT values this package has no
// name for, so that Transport.String can still show the kernel's number.
const unknownTransportBase Transport = 100

// Module returns the kernel module providing t, or "" when there is none to
// load.
func (t Transport) Module() string {
	switch t {
	case TransportIB:
		return "rds_rdma"
	case TransportTCP:
		return "rds_tcp"
	case TransportLoop, TransportAuto:
		return "rds"
	}
	return ""
}

// Kernel returns the value SO_RDS_TRANSPORT uses for t. ok is false for
// transports that cannot be requested (auto, loopback, none): the kernel
// only accepts values below RDS_TRANS_COUNT, and loopback is chosen by
// address, never by request.
func (t Transport) Kernel() (v int, ok bool) {
	switch t {
	case TransportIB:
		return kernelTransIB, true
	case TransportTCP:
		return kernelTransTCP, true
	case TransportIWARP:
		return kernelTransGap, true
	}
	return 0, false
}

// transportFromKernel maps an SO_RDS_TRANSPORT value to a Transport.
func transportFromKernel(v int32) Transport {
	switch v {
	case kernelTransIB:
		return TransportIB
	case kernelTransGap:
		return TransportIWARP
	case kernelTransTCP:
		return TransportTCP
	case kernelTransLoop:
		return TransportLoop
	case kernelTransNone:
		return TransportNone
	}
	return unknownTransportBase + Transport(v)
}
