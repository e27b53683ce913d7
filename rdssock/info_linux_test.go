package rdssock

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/internal/rdsinfo"
)

// fakeTables serves canned table bytes; a table it lacks fails as
// getsockopt does on a kernel without it (ENOPROTOOPT), wrapped as
// Conn.readInfo wraps it.
type fakeTables struct {
	rows  map[rdsinfo.Table][]byte
	each  map[rdsinfo.Table]int
	reads []rdsinfo.Table
}

func (f *fakeTables) read(t rdsinfo.Table) ([]byte, int, error) {
	f.reads = append(f.reads, t)
	data, ok := f.rows[t]
	if !ok {
		return nil, 0, opError("getsockopt", nil, nil, wrapSyscall("getsockopt("+t.String()+")", unix.ENOPROTOOPT, ""))
	}
	return data, f.each[t], nil
}

func socketRow4(bound netip.AddrPort) []byte {
	b := binary.NativeEndian.AppendUint32(nil, 1000)
	a := bound.Addr().As4()
	b = append(b, a[:]...)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, bound.Port())
	b = append(b, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, 2000)
	return binary.NativeEndian.AppendUint64(b, 7)
}

func connRow(local, remote netip.Addr, tos uint8, v6 bool) []byte {
	b := binary.NativeEndian.AppendUint64(nil, 1)
	b = binary.NativeEndian.AppendUint64(b, 2)
	if v6 {
		l, r := local.As16(), remote.As16()
		b = append(append(b, l[:]...), r[:]...)
	} else {
		l, r := local.As4(), remote.As4()
		b = append(append(b, l[:]...), r[:]...)
	}
	b = append(b, make([]byte, 16)...)
	copy(b[len(b)-16:], "tcp")
	b = append(b, 4) // connected
	if !v6 {
		b = append(b, tos)
	}
	return b
}

// Without IPv6 RDS the RDS6 table gives ENOPROTOOPT and the IPv4 table is
// read instead.
func TestReadTableFallsBackToIPv4(t *testing.T) {
	bound := netip.MustParseAddrPort("10.0.0.1:4660")
	f := &fakeTables{
		rows: map[rdsinfo.Table][]byte{rdsinfo.Sockets: socketRow4(bound)},
		each: map[rdsinfo.Table]int{rdsinfo.Sockets: 28},
	}
	got, err := readTable(f.read, rdsinfo.Sockets6, rdsinfo.Sockets, rdsinfo.ParseSockets)
	if err != nil || len(got) != 1 || got[0].Bound != bound || got[0].ReceiveBuffer != 2000 {
		t.Fatalf("readTable = %+v, %v; want one socket bound to %v", got, err, bound)
	}
	if want := []rdsinfo.Table{rdsinfo.Sockets6, rdsinfo.Sockets}; !reflect.DeepEqual(f.reads, want) {
		t.Fatalf("read %v, want %v", f.reads, want)
	}
	// No IPv4 table either (the IB tables without rds_rdma): the IPv4
	// table's error.
	f = &fakeTables{}
	if _, err := readTable(f.read, rdsinfo.IBConnections6, rdsinfo.IBConnections, rdsinfo.ParseIBConnections); !errors.Is(err, unix.ENOPROTOOPT) {
		t.Fatalf("readTable with neither table: %v, want ENOPROTOOPT", err)
	}
}

// Connections come from both tables: IPv4 rows (with TOS) from the IPv4
// one, the others from the RDS6 one, whose IPv4-mapped rows are skipped.
func TestMergeTable(t *testing.T) {
	l4, r4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	l6, r6 := netip.MustParseAddr("fd11::1"), netip.MustParseAddr("fd11::2")
	f := &fakeTables{
		rows: map[rdsinfo.Table][]byte{
			rdsinfo.Connections:  connRow(l4, r4, 3, false),
			rdsinfo.Connections6: append(connRow(netip.AddrFrom16(l4.As16()), netip.AddrFrom16(r4.As16()), 0, true), connRow(l6, r6, 0, true)...),
		},
		each: map[rdsinfo.Table]int{rdsinfo.Connections: 42, rdsinfo.Connections6: 65},
	}
	is4 := func(x rdsinfo.Connection) bool { return x.Local.Is4In6() }
	got, err := mergeTable(f.read, rdsinfo.Connections6, rdsinfo.Connections, rdsinfo.ParseConnections, is4)
	if err != nil || len(got) != 2 {
		t.Fatalf("mergeTable = %+v, %v; want 2 rows", got, err)
	}
	if got[0].Local != l4 || got[0].Remote != r4 || got[0].TOS != 3 || got[1].Local != l6 || got[1].Remote != r6 {
		t.Fatalf("mergeTable = %+v; want %v->%v with TOS 3, then %v->%v", got, l4, r4, l6, r6)
	}
	// Without IPv6 RDS: the IPv4 rows alone.
	delete(f.rows, rdsinfo.Connections6)
	got, err = mergeTable(f.read, rdsinfo.Connections6, rdsinfo.Connections, rdsinfo.ParseConnections, is4)
	if err != nil || len(got) != 1 || got[0].Local != l4 {
		t.Fatalf("mergeTable without the RDS6 table = %+v, %v; want the IPv4 row", got, err)
	}
}
