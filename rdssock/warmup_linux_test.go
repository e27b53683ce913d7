//go:build linux

package rdssock

import (
	"net/netip"
	"testing"
)

// TestWarmedUpKnownPeerAllocs checks that a send's look-up of a peer whose
// connection is up allocates nothing, and that pings and Conns without
// automatic warm-up skip it.
func TestWarmedUpKnownPeerAllocs(t *testing.T) {
	a, b, err := socketpairConns()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	known := netip.MustParseAddrPort("10.0.0.2:4000")
	a.warm.mu.Lock()
	a.warm.markReadyLocked(netip.MustParseAddr("10.0.0.3"))
	a.warm.markReadyLocked(known.Addr())
	a.warm.mu.Unlock()
	if !a.warm.isReady(known.Addr()) || !a.warm.isReady(netip.MustParseAddr("10.0.0.3")) {
		t.Fatal("a peer marked ready is not found")
	}
	if a.warm.isReady(netip.MustParseAddr("10.0.0.4")) {
		t.Fatal("an unknown peer is found ready")
	}
	if p := a.warm.last.Load(); p == nil || *p != netip.MustParseAddr("10.0.0.3") {
		t.Fatalf("the last peer found ready is %v, want 10.0.0.3", p)
	}
	if a.warm.isReady(netip.MustParseAddr("::ffff:10.0.0.3")) {
		t.Fatal("the IPv4-mapped form of the last peer found is found ready, which the set itself does not hold")
	}
	other := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.3"), 4000)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := a.warmedUp(nil, known, 0); err != nil {
			t.Fatal(err)
		}
		if err := a.warmedUp(nil, other, 0); err != nil {
			t.Fatal(err) // known too: the last peer found changes, without allocating
		}
		if err := a.warmedUp(nil, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), 0), 0); err != nil {
			t.Fatal(err) // a ping: no warm-up
		}
	})
	if allocs != 0 {
		t.Fatalf("warmedUp for a known peer: %v allocations, want 0", allocs)
	}
}

// TestReadyPeersBounded checks that the set of warmed-up peers stays
// within maxReadyPeers however many peers a Conn sends to, and that the
// newest peer is always remembered.
func TestReadyPeersBounded(t *testing.T) {
	var w warmUps
	w.mu.Lock()
	defer w.mu.Unlock()
	var last netip.Addr
	for i := range 3*maxReadyPeers + 7 {
		last = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		w.markReadyLocked(last)
		if n := len(*w.ready.Load()); n > maxReadyPeers {
			t.Fatalf("after %d peers the ready set holds %d, more than %d", i+1, n, maxReadyPeers)
		}
	}
	if !w.isReady(last) {
		t.Fatal("the newest peer was forgotten")
	}
	if w.isReady(netip.AddrFrom4([4]byte{10, 0, 0, 0})) {
		t.Fatal("the first of many peers is still remembered: the set never started over")
	}
}
