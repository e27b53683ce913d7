//go:build linux

package rdmaops

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/go-rds/rds/cmsg"
)

// plan notifies every SignalEvery-th operation per destination, the
// forced ones, never a SILENT one, and keys destinations as the kernel
// does (an IPv4-mapped address is the IPv4 one).
func TestPlanSignalEvery(t *testing.T) {
	c := &Conn{opts: Options{SignalEvery: 3}}
	c.recvErr.Do(func() {}) // no socket here
	a := netip.MustParseAddrPort("10.0.0.1:4000")
	amapped := netip.MustParseAddrPort("[::ffff:10.0.0.1]:4000")
	b := netip.MustParseAddrPort("10.0.0.1:4001")
	var got []bool
	var lanes []uint32
	step := func(to netip.AddrPort, op *Op) {
		t.Helper()
		id, notify, err := c.plan(to, op)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, notify)
		lanes = append(lanes, id)
	}
	plain, silent, forced := &Op{}, &Op{Flags: cmsg.FlagSilent}, &Op{Signal: true}
	step(a, plain)       // 1
	step(amapped, plain) // 2
	step(b, plain)       // b: 1
	step(a, silent)      // 3rd, but SILENT: unsignaled
	step(a, plain)       // due: notified
	step(a, forced)      // forced
	step(a, plain)       // 1
	want := []bool{false, false, false, false, true, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("notify %v, want %v", got, want)
		}
	}
	if lanes[0] != lanes[1] || lanes[0] == lanes[2] || lanes[0] == 0 || lanes[2] == 0 {
		t.Fatalf("lanes %v", lanes)
	}
	if c.laneOf(amapped) != lanes[0] || c.laneOf(netip.MustParseAddrPort("10.0.0.2:4000")) != 0 {
		t.Fatal("laneOf")
	}
	if _, _, err := c.plan(a, &Op{Signal: true, Flags: cmsg.FlagSilent}); !errors.Is(err, ErrBadOp) {
		t.Fatalf("forced SILENT: %v", err)
	}
}

// The lane map is bounded: past maxLanes, destinations whose last
// operation was notified are forgotten; the others keep their lane, and
// lane ids are never reused.
func TestPlanLaneBound(t *testing.T) {
	c := &Conn{opts: Options{SignalEvery: 2}}
	c.recvErr.Do(func() {})
	open := netip.MustParseAddrPort("10.1.0.1:1")
	openID, _, _ := c.plan(open, &Op{}) // unsignaled: its lane must survive
	seen := map[uint32]bool{openID: true}
	for i := range maxLanes + 10 {
		to := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), 2)
		id, _, _ := c.plan(to, &Op{Signal: true})
		if seen[id] {
			t.Fatalf("lane id %d reused", id)
		}
		seen[id] = true
	}
	if len(c.lanes) > maxLanes {
		t.Fatalf("%d lanes kept", len(c.lanes))
	}
	if c.laneOf(open) != openID {
		t.Fatal("a lane with an unsignaled operation was forgotten")
	}
}
