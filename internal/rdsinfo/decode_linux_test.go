package rdsinfo

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/go-rds/rds/internal/rdsabi"
)

// Byte images below are written out field by field from linux/rds.h
// (integers in the host's byte order, big-endian addresses and ports).

func h64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

func h32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func fixed(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

func TestParseCounters(t *testing.T) {
	data := cat(
		fixed("conn_reset", 32), h64(3),
		fixed("recv_queued", 32), h64(257),
	)
	got, err := ParseCounters(data, 40)
	if err != nil {
		t.Fatal(err)
	}
	want := []Counter{{"conn_reset", 3}, {"recv_queued", 257}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseCounters = %+v, want %+v", got, want)
	}
}

func TestParseConnections(t *testing.T) {
	v4 := cat(h64(5), h64(7), []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, fixed("tcp", 16), []byte{rdsabi.InfoConnFlagConnected, 3})
	if len(v4) != 42 {
		t.Fatalf("test image is %d bytes, want 42", len(v4))
	}
	got, err := ParseConnections(v4, 42, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Connection{NextTxSeq: 5, NextRxSeq: 7, Local: netip.MustParseAddr("10.0.0.1"), Remote: netip.MustParseAddr("10.0.0.2"), Transport: "tcp", Flags: rdsabi.InfoConnFlagConnected, TOS: 3}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseConnections(v4) = %+v, want %+v", got, want)
	}

	l6, r6 := netip.MustParseAddr("fd11::1"), netip.MustParseAddr("::ffff:10.0.0.9")
	a, b := l6.As16(), r6.As16()
	v6 := cat(h64(1), h64(2), a[:], b[:], fixed("infiniband", 16), []byte{rdsabi.InfoConnFlagConnecting})
	got, err = ParseConnections(v6, 65, true)
	if err != nil {
		t.Fatal(err)
	}
	want = Connection{NextTxSeq: 1, NextRxSeq: 2, Local: l6, Remote: r6, Transport: "infiniband", Flags: rdsabi.InfoConnFlagConnecting}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseConnections(v6) = %+v, want %+v", got, want)
	}
}

// Older kernels report shorter rows (no tos), newer ones may add fields:
// the parser reads what fits and ignores what it does not know.
func TestParseConnectionsOtherRowSizes(t *testing.T) {
	short := cat(h64(5), h64(7), []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, fixed("tcp", 16), []byte{rdsabi.InfoConnFlagSending}) // 41 bytes
	got, err := ParseConnections(cat(short, short), 41, false)
	if err != nil || len(got) != 2 || got[1].Transport != "tcp" || got[1].Flags != rdsabi.InfoConnFlagSending || got[1].TOS != 0 {
		t.Fatalf("41-byte rows: %+v, %v", got, err)
	}
	long := cat(short, []byte{9, 0xAA, 0xBB}) // tos 9 and two unknown bytes
	got, err = ParseConnections(long, 44, false)
	if err != nil || len(got) != 1 || got[0].TOS != 9 {
		t.Fatalf("44-byte row: %+v, %v", got, err)
	}
}

func TestParseMessages(t *testing.T) {
	v4 := cat(h64(99), h32(1024), []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, []byte{0x0f, 0xa0}, []byte{0x0f, 0xa1}, []byte{rdsabi.InfoMsgFlagAck, 2})
	got, err := ParseMessages(v4, 26, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Message{Seq: 99, Len: 1024, Local: netip.MustParseAddrPort("10.0.0.1:4000"), Remote: netip.MustParseAddrPort("10.0.0.2:4001"), Flags: rdsabi.InfoMsgFlagAck, TOS: 2}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseMessages(v4) = %+v, want %+v", got, want)
	}
	l, r := netip.MustParseAddr("fd11::1").As16(), netip.MustParseAddr("fd11::2").As16()
	v6 := cat(h64(1), h32(8), l[:], r[:], []byte{0, 80}, []byte{1, 0}, []byte{rdsabi.InfoMsgFlagFastAck, 0})
	got, err = ParseMessages(v6, 50, true)
	if err != nil {
		t.Fatal(err)
	}
	want = Message{Seq: 1, Len: 8, Local: netip.MustParseAddrPort("[fd11::1]:80"), Remote: netip.MustParseAddrPort("[fd11::2]:256"), Flags: rdsabi.InfoMsgFlagFastAck}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseMessages(v6) = %+v, want %+v", got, want)
	}
}

func TestParseSockets(t *testing.T) {
	v4 := cat(h32(212992), []byte{10, 0, 0, 1}, []byte{0, 0, 0, 0}, []byte{0x12, 0x34}, []byte{0, 0}, h32(425984), h64(31337))
	got, err := ParseSockets(v4, 28, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Socket{SendBuffer: 212992, ReceiveBuffer: 425984, Bound: netip.MustParseAddrPort("10.0.0.1:4660"), Connected: netip.MustParseAddrPort("0.0.0.0:0"), Inode: 31337}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseSockets(v4) = %+v, want %+v", got, want)
	}
	b6, c6 := netip.MustParseAddr("::1").As16(), netip.MustParseAddr("::").As16()
	v6 := cat(h32(1), b6[:], c6[:], []byte{0, 7}, []byte{0, 0}, h32(2), h64(3))
	got, err = ParseSockets(v6, 52, true)
	if err != nil {
		t.Fatal(err)
	}
	want = Socket{SendBuffer: 1, ReceiveBuffer: 2, Bound: netip.MustParseAddrPort("[::1]:7"), Connected: netip.MustParseAddrPort("[::]:0"), Inode: 3}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseSockets(v6) = %+v, want %+v", got, want)
	}
}

func TestParseTCPSockets(t *testing.T) {
	v4 := cat([]byte{10, 0, 0, 1}, []byte{0x40, 0x96}, []byte{10, 0, 0, 2}, []byte{0xc0, 0x00}, h64(4), h64(5), h32(6), h32(7), h32(8), []byte{1})
	if len(v4) != 41 {
		t.Fatalf("test image is %d bytes, want 41", len(v4))
	}
	got, err := ParseTCPSockets(v4, 41, false)
	if err != nil {
		t.Fatal(err)
	}
	want := TCPSocket{Local: netip.MustParseAddrPort("10.0.0.1:16534"), Peer: netip.MustParseAddrPort("10.0.0.2:49152"), HeaderRemaining: 4, DataRemaining: 5, LastSentNext: 6, LastExpectedUna: 7, LastSeenUna: 8, TOS: 1}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseTCPSockets(v4) = %+v, want %+v", got, want)
	}
	l, p := netip.MustParseAddr("fd11::1").As16(), netip.MustParseAddr("fd11::2").As16()
	v6 := cat(l[:], []byte{0x40, 0x96}, p[:], []byte{0x9c, 0x40}, h64(1), h64(2), h32(3), h32(4), h32(5))
	if len(v6) != 64 {
		t.Fatalf("test image is %d bytes, want 64", len(v6))
	}
	got, err = ParseTCPSockets(v6, 64, true)
	if err != nil {
		t.Fatal(err)
	}
	want = TCPSocket{Local: netip.MustParseAddrPort("[fd11::1]:16534"), Peer: netip.MustParseAddrPort("[fd11::2]:40000"), HeaderRemaining: 1, DataRemaining: 2, LastSentNext: 3, LastExpectedUna: 4, LastSeenUna: 5}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseTCPSockets(v6) = %+v, want %+v", got, want)
	}
}

func TestParseIBConnections(t *testing.T) {
	var sg, dg [16]byte
	for i := range sg {
		sg[i], dg[i] = byte(i), byte(0xf0+i)
	}
	// Not packed: two bytes of padding after sl align cache_allocs.
	v4 := cat([]byte{10, 22, 0, 1}, []byte{10, 22, 0, 2}, sg[:], dg[:], h32(256), h32(512), h32(8), h32(4096), h32(257), []byte{5, 6, 0, 0}, h32(77))
	if len(v4) != 68 {
		t.Fatalf("test image is %d bytes, want 68", len(v4))
	}
	got, err := ParseIBConnections(v4, 68, false)
	if err != nil {
		t.Fatal(err)
	}
	want := IBConnection{Source: netip.MustParseAddr("10.22.0.1"), Dest: netip.MustParseAddr("10.22.0.2"), SourceGID: sg, DestGID: dg,
		MaxSendWR: 256, MaxRecvWR: 512, MaxSendSGE: 8, RDMAMRMax: 4096, RDMAMRSize: 257, TOS: 5, SL: 6, CacheAllocs: 77}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseIBConnections(v4) = %+v, want %+v", got, want)
	}
	s6, d6 := netip.MustParseAddr("fd22::1").As16(), netip.MustParseAddr("fd22::2").As16()
	v6 := cat(s6[:], d6[:], sg[:], dg[:], h32(1), h32(2), h32(3), h32(4), h32(5), []byte{6, 7, 0, 0}, h32(8))
	if len(v6) != 92 {
		t.Fatalf("test image is %d bytes, want 92", len(v6))
	}
	got, err = ParseIBConnections(v6, 92, true)
	if err != nil {
		t.Fatal(err)
	}
	want = IBConnection{Source: netip.MustParseAddr("fd22::1"), Dest: netip.MustParseAddr("fd22::2"), SourceGID: sg, DestGID: dg,
		MaxSendWR: 1, MaxRecvWR: 2, MaxSendSGE: 3, RDMAMRMax: 4, RDMAMRSize: 5, TOS: 6, SL: 7, CacheAllocs: 8}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ParseIBConnections(v6) = %+v, want %+v", got, want)
	}
}

func TestParseMalformed(t *testing.T) {
	if _, err := ParseCounters(make([]byte, 41), 40); !errors.Is(err, ErrFormat) {
		t.Errorf("41 bytes of 40-byte rows: %v, want ErrFormat", err)
	}
	if _, err := ParseSockets(make([]byte, 28), 0, false); !errors.Is(err, ErrFormat) {
		t.Errorf("row size 0: %v, want ErrFormat", err)
	}
	if got, err := ParseConnections(nil, 0, false); err != nil || len(got) != 0 {
		t.Errorf("empty table: %v, %v; want no rows, no error", got, err)
	}
	// Rows shorter than the fields: read as zero, never a panic.
	got, err := ParseIBConnections(make([]byte, 6), 3, true)
	if err != nil || len(got) != 2 || got[0].Source != netip.IPv6Unspecified() || got[1].CacheAllocs != 0 {
		t.Errorf("tiny rows: %+v, %v", got, err)
	}
}

func TestTableNames(t *testing.T) {
	tables := Tables()
	if len(tables) != 17 {
		t.Fatalf("Tables() has %d tables, want the 17 linux/rds.h defines", len(tables))
	}
	for _, tb := range tables {
		back, err := Parse(tb.String())
		if err != nil || back != tb {
			t.Errorf("Parse(%q) = %v, %v; want %v", tb.String(), back, err, int(tb))
		}
	}
	if _, err := Parse("flows"); err == nil {
		t.Error("Parse(flows) succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(make([]byte, 42), 42, false)
	f.Add(make([]byte, 92), 92, true)
	f.Fuzz(func(t *testing.T, data []byte, each int, v6 bool) {
		ParseCounters(data, each)
		ParseConnections(data, each, v6)
		ParseMessages(data, each, v6)
		ParseSockets(data, each, v6)
		ParseTCPSockets(data, each, v6)
		if rows, err := ParseIBConnections(data, each, v6); err == nil && each > 0 && len(rows) != len(data)/each {
			t.Fatalf("%d rows from %d bytes of %d-byte rows", len(rows), len(data), each)
		}
	})
}

func TestTableV6(t *testing.T) {
	var v6 []string
	for _, tb := range Tables() {
		if tb.V6() {
			v6 = append(v6, tb.String())
		}
	}
	want := []string{"connections6", "send-messages6", "retrans-messages6", "recv-messages6", "sockets6", "tcp-sockets6", "ib-connections6"}
	if !reflect.DeepEqual(v6, want) {
		t.Fatalf("RDS6 tables %v, want %v", v6, want)
	}
}
