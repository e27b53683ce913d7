//go:build integration

package reliability

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

// freshPair adds a new IPv4 address on each veth end, so that RDS has never
// had a connection between them: RDS/TCP keys connections by address pair
// (every TOS maps to 0 on TCP, so a TOS cannot give a fresh one). The
// addresses are in the topology's /24 and stay until the VM stops.
func freshPair(t testing.TB, hi, hp *netlinkcfg.Handle, lo, hiOctet byte) (init, peer netip.Addr) {
	t.Helper()
	init = netip.AddrFrom4([4]byte{10, 11, 0, lo})
	peer = netip.AddrFrom4([4]byte{10, 11, 0, hiOctet})
	if err := hi.AddAddr(vmtest.TCPLink, netip.PrefixFrom(init, vmtest.PrefixLen4)); err != nil {
		t.Fatalf("add %v to %s: %v", init, vmtest.TCPLink, err)
	}
	if err := hp.AddAddr(vmtest.TCPPeerLink, netip.PrefixFrom(peer, vmtest.PrefixLen4)); err != nil {
		t.Fatalf("add %v to %s: %v", peer, vmtest.TCPPeerLink, err)
	}
	return init, peer
}

// freshOutcome is what one no-warm-up run on a brand-new connection saw.
type freshOutcome struct {
	res     result
	missing []uint64 // accepted sequence numbers that never arrived
	orders  []string // per sender: arrival order, compactly
	queued  int      // messages still on the sender's send or retransmit queue at the end
	deltas  string   // RDS counters that moved
	tcp     string   // TCP counters of either namespace that moved
	dropped int      // recv_drop_no_sock + recv_drop_dead_sock + recv_drop_old_seq moves
}

// runFresh binds a receiver, then a sender, and sends n numbered messages
// at once, with no ping or other warm-up, over a connection that did not
// exist before. It waits up to wait for them.
//
// With bothWays, a second sender on the receiving side sends n messages
// the other way at the same moment, so both kernels set up the connection
// at once.
func runFresh(t *testing.T, sendSide side, from, to netip.Addr, n int, bothWays bool, wait time.Duration) freshOutcome {
	t.Helper()
	recvSide := peer
	if sendSide == peer {
		recvSide = local
	}
	f := newFlow(t)
	rc := f.receiver(recvSide, to, nil)
	var back *rdssock.Conn
	if bothWays {
		back = f.receiver(sendSide, from, nil)
	}
	s := f.sender(sendSide, from, rc, n, 4096, nil)
	if bothWays {
		f.sender(recvSide, to, back, n, 4096, nil)
	}
	for _, c := range []*rdssock.Conn{s.c, rc} {
		if flags, ok := connFlags(t, c, from, to); ok {
			t.Fatalf("connection %v -> %v exists before the first send (flags %#x): not fresh", from, to, flags)
		}
		if flags, ok := connFlags(t, c, to, from); ok {
			t.Fatalf("connection %v -> %v exists before the first send (flags %#x): not fresh", to, from, flags)
		}
	}
	before, tcpBefore := counters(t, s.c), tcpBoth(t)
	res, _ := f.run(wait)
	after, tcpAfter := counters(t, s.c), tcpBoth(t)
	var o freshOutcome
	for i, sd := range []side{local, peer} {
		for _, name := range []string{"Tcp.EstabResets", "Tcp.OutRsts", "Tcp.AttemptFails", "TcpExt.TCPAbortOnClose", "TcpExt.TCPAbortOnData"} {
			if d := tcpAfter[i][name] - tcpBefore[i][name]; d != 0 {
				o.tcp += fmt.Sprintf(" %s:%s=%d", sd, name, d)
			}
		}
	}

	o.res = res
	o.deltas = nonZeroDeltas(before, after)
	for _, name := range []string{"recv_drop_no_sock", "recv_drop_dead_sock", "recv_drop_old_seq"} {
		o.dropped += delta(t, before, after, name)
	}
	f.tr.mu.Lock()
	for _, sn := range f.senders {
		p := f.tr.pairs[sn.id]
		for seq := range uint64(sn.accepted) {
			if !p.seen[seq] {
				o.missing = append(o.missing, seq+uint64(sn.id)*1000000)
			}
		}
		o.orders = append(o.orders, fmt.Sprintf("sender %d: %s", sn.id, seqRanges(p.order)))
	}
	f.tr.mu.Unlock()
	for _, sn := range f.senders {
		for _, tb := range []rdssock.InfoTable{rdssock.Info6SendMessages, rdssock.Info6RetransMessages} {
			msgs, err := sn.c.Messages(tb)
			if err != nil {
				t.Fatalf("%v: %v", tb, err)
			}
			for _, m := range msgs {
				if m.Local.Addr().Unmap() == sn.c.LocalAddrPort().Addr() && m.Local.Port() == sn.c.LocalAddrPort().Port() {
					o.queued++
				}
			}
		}
	}
	return o
}

// TestFreshConnection sends numbered messages on brand-new RDS/TCP
// connections without any warm-up, several times in each direction (from
// the smaller address, which initiates every RDS/TCP path, and from the
// larger one, whose first connection attempt the smaller side refuses and
// replaces). Every accepted message must arrive exactly once, in order.
func TestFreshConnection(t *testing.T) {
	vmtest.Require(t)
	hi, hp := handles(t)
	const (
		reps = 6
		n    = 200
	)
	for d, dir := range []struct {
		name     string
		from     side
		bothWays bool
	}{
		{"smaller-to-larger", local, false},
		{"larger-to-smaller", peer, false},
		{"both-ways", local, true},
	} {
		t.Run(dir.name, func(t *testing.T) {
			var total result
			var bad []string
			for i := range reps {
				// Addresses 10.11.0.20.. in the initial namespace, 10.11.0.120.. in the peer.
				octet := byte(20 + d*reps + i)
				a, b := freshPair(t, hi, hp, octet, octet+100)
				from, to := a, b
				if dir.from == peer {
					from, to = b, a
				}
				o := runFresh(t, dir.from, from, to, n, dir.bothWays, 15*time.Second)
				total.sent += o.res.sent
				total.accepted += o.res.accepted
				total.received += o.res.received
				total.dup += o.res.dup
				total.reordered += o.res.reordered
				total.corrupt += o.res.corrupt
				total.lost += o.res.lost
				total.unexpected += o.res.unexpected
				t.Logf("run %d %v -> %v: accepted %d received %d dup %d reordered %d lost %d (missing %s; sender k's sequence numbers are shown plus k*1000000), still queued at senders %d; RDS counters: %s; TCP counters:%s",
					i, from, to, o.res.accepted, o.res.received, o.res.dup, o.res.reordered, o.res.lost, seqRanges(o.missing), o.queued, o.deltas, o.tcp)
				if o.res.reordered > 0 {
					t.Logf("run %d arrival order: %s", i, strings.Join(o.orders, "; "))
				}
				if !o.res.clean() {
					bad = append(bad, fmt.Sprintf("run %d: %+v", i, o.res))
				}
			}
			outcome := fmt.Sprintf("%d runs exactly-once in order", reps)
			if len(bad) > 0 {
				outcome = fmt.Sprintf("FAILED in %d of %d runs", len(bad), reps)
			}
			logLine(t, "fresh-connection-"+dir.name, total, outcome)
			for _, b := range bad {
				t.Errorf("fresh connection, no warm-up: %s", b)
			}
		})
	}
}

// seqRanges prints sequence numbers compactly: "0-4,7,9-12" (in the given
// order, so an arrival order shows its jumps).
func seqRanges(s []uint64) string {
	if len(s) == 0 {
		return "none"
	}
	var b strings.Builder
	start, prev := s[0], s[0]
	flush := func() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if start == prev {
			fmt.Fprintf(&b, "%d", start)
		} else {
			fmt.Fprintf(&b, "%d-%d", start, prev)
		}
	}
	for _, v := range s[1:] {
		if v == prev+1 {
			prev = v
			continue
		}
		flush()
		start, prev = v, v
	}
	flush()
	return b.String()
}
