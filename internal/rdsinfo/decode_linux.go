package rdsinfo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"github.com/go-rds/rds/internal/rdsabi"
)

// rows splits data into rows of each bytes, copies each row into a zeroed
// generated struct T and converts it. The kernel reports its row size,
// which can differ from linux/rds.h (fields are added at the end over
// time): a longer row is cut to T, a shorter one leaves T's last fields
// zero.
func rows[T, R any](data []byte, each int, conv func(*T) R) ([]R, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if each <= 0 || len(data)%each != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a multiple of the row size %d", ErrFormat, len(data), each)
	}
	out := make([]R, 0, len(data)/each)
	for off := 0; off < len(data); off += each {
		var x T
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&x)), unsafe.Sizeof(x)), data[off:off+each])
		out = append(out, conv(&x))
	}
	return out, nil
}

// The generated structs hold the kernel's unaligned __u64 and __be16
// fields as byte arrays; these read them.
func u64(b [8]uint8) uint64  { return binary.NativeEndian.Uint64(b[:]) }
func u32(b [4]uint8) uint32  { return binary.NativeEndian.Uint32(b[:]) }
func port(b [2]uint8) uint16 { return binary.BigEndian.Uint16(b[:]) }

func cstring(b []uint8) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ParseCounters decodes RDS_INFO_COUNTERS (or RDS_INFO_CONNECTION_STATS)
// data with the row size the kernel reported.
func ParseCounters(data []byte, each int) ([]Counter, error) {
	return rows(data, each, func(x *rdsabi.InfoCounter) Counter {
		return Counter{Name: cstring(x.Name[:]), Value: x.Value}
	})
}

// ParseConnections decodes RDS_INFO_CONNECTIONS (v6 false) or
// RDS6_INFO_CONNECTIONS (v6 true) data.
func ParseConnections(data []byte, each int, v6 bool) ([]Connection, error) {
	if v6 {
		return rows(data, each, func(x *rdsabi.Info6Connection) Connection {
			return Connection{
				NextTxSeq: u64(x.NextTxSeq), NextRxSeq: u64(x.NextRxSeq),
				Local: netip.AddrFrom16(x.LocalAddr), Remote: netip.AddrFrom16(x.ForeignAddr),
				Transport: cstring(x.Transport[:]), Flags: x.Flags,
			}
		})
	}
	return rows(data, each, func(x *rdsabi.InfoConnection) Connection {
		return Connection{
			NextTxSeq: u64(x.NextTxSeq), NextRxSeq: u64(x.NextRxSeq),
			Local: netip.AddrFrom4(x.LocalAddr), Remote: netip.AddrFrom4(x.ForeignAddr),
			Transport: cstring(x.Transport[:]), Flags: x.Flags, TOS: x.TOS,
		}
	})
}

// ParseMessages decodes the send, retransmit or receive queue tables.
func ParseMessages(data []byte, each int, v6 bool) ([]Message, error) {
	if v6 {
		return rows(data, each, func(x *rdsabi.Info6Message) Message {
			return Message{
				Seq: u64(x.Seq), Len: u32(x.Len),
				Local:  netip.AddrPortFrom(netip.AddrFrom16(x.LocalAddr), port(x.LocalPort)),
				Remote: netip.AddrPortFrom(netip.AddrFrom16(x.ForeignAddr), port(x.ForeignPort)),
				Flags:  x.Flags, TOS: x.TOS,
			}
		})
	}
	return rows(data, each, func(x *rdsabi.InfoMessage) Message {
		return Message{
			Seq: u64(x.Seq), Len: u32(x.Len),
			Local:  netip.AddrPortFrom(netip.AddrFrom4(x.LocalAddr), port(x.LocalPort)),
			Remote: netip.AddrPortFrom(netip.AddrFrom4(x.ForeignAddr), port(x.ForeignPort)),
			Flags:  x.Flags, TOS: x.TOS,
		}
	})
}

// ParseSockets decodes RDS_INFO_SOCKETS or RDS6_INFO_SOCKETS data.
func ParseSockets(data []byte, each int, v6 bool) ([]Socket, error) {
	if v6 {
		return rows(data, each, func(x *rdsabi.Info6Socket) Socket {
			return Socket{
				SendBuffer: u32(x.SndBuf), ReceiveBuffer: u32(x.RcvBuf),
				Bound:     netip.AddrPortFrom(netip.AddrFrom16(x.BoundAddr), port(x.BoundPort)),
				Connected: netip.AddrPortFrom(netip.AddrFrom16(x.ConnectedAddr), port(x.ConnectedPort)),
				Inode:     u64(x.Inum),
			}
		})
	}
	return rows(data, each, func(x *rdsabi.InfoSocket) Socket {
		return Socket{
			SendBuffer: u32(x.SndBuf), ReceiveBuffer: u32(x.RcvBuf),
			Bound:     netip.AddrPortFrom(netip.AddrFrom4(x.BoundAddr), port(x.BoundPort)),
			Connected: netip.AddrPortFrom(netip.AddrFrom4(x.ConnectedAddr), port(x.ConnectedPort)),
			Inode:     u64(x.Inum),
		}
	})
}

// ParseTCPSockets decodes RDS_INFO_TCP_SOCKETS or RDS6_INFO_TCP_SOCKETS
// data.
func ParseTCPSockets(data []byte, each int, v6 bool) ([]TCPSocket, error) {
	if v6 {
		return rows(data, each, func(x *rdsabi.Info6TCPSocket) TCPSocket {
			return TCPSocket{
				Local:           netip.AddrPortFrom(netip.AddrFrom16(x.LocalAddr), port(x.LocalPort)),
				Peer:            netip.AddrPortFrom(netip.AddrFrom16(x.PeerAddr), port(x.PeerPort)),
				HeaderRemaining: u64(x.HdrRem), DataRemaining: u64(x.DataRem),
				LastSentNext: u32(x.LastSentNxt), LastExpectedUna: u32(x.LastExpectedUna), LastSeenUna: u32(x.LastSeenUna),
			}
		})
	}
	return rows(data, each, func(x *rdsabi.InfoTCPSocket) TCPSocket {
		return TCPSocket{
			Local:           netip.AddrPortFrom(netip.AddrFrom4(x.LocalAddr), port(x.LocalPort)),
			Peer:            netip.AddrPortFrom(netip.AddrFrom4(x.PeerAddr), port(x.PeerPort)),
			HeaderRemaining: u64(x.HdrRem), DataRemaining: u64(x.DataRem),
			LastSentNext: u32(x.LastSentNxt), LastExpectedUna: u32(x.LastExpectedUna), LastSeenUna: u32(x.LastSeenUna),
			TOS: x.TOS,
		}
	})
}

// ParseIBConnections decodes RDS_INFO_IB_CONNECTIONS or
// RDS6_INFO_IB_CONNECTIONS data.
func ParseIBConnections(data []byte, each int, v6 bool) ([]IBConnection, error) {
	if v6 {
		return rows(data, each, func(x *rdsabi.Info6RDMAConnection) IBConnection {
			return IBConnection{
				Source: netip.AddrFrom16(x.SrcAddr), Dest: netip.AddrFrom16(x.DstAddr),
				SourceGID: x.SrcGID, DestGID: x.DstGID,
				MaxSendWR: x.MaxSendWR, MaxRecvWR: x.MaxRecvWR, MaxSendSGE: x.MaxSendSGE,
				RDMAMRMax: x.RDMAMRMax, RDMAMRSize: x.RDMAMRSize,
				TOS: x.TOS, SL: x.SL, CacheAllocs: x.CacheAllocs,
			}
		})
	}
	return rows(data, each, func(x *rdsabi.InfoRDMAConnection) IBConnection {
		return IBConnection{
			Source: netip.AddrFrom4(x.SrcAddr), Dest: netip.AddrFrom4(x.DstAddr),
			SourceGID: x.SrcGID, DestGID: x.DstGID,
			MaxSendWR: x.MaxSendWR, MaxRecvWR: x.MaxRecvWR, MaxSendSGE: x.MaxSendSGE,
			RDMAMRMax: x.RDMAMRMax, RDMAMRSize: x.RDMAMRSize,
			TOS: x.TOS, SL: x.SL, CacheAllocs: x.CacheAllocs,
		}
	})
}
