//go:build integration

package reliability

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
)

// TestLossyLinks runs numbered, checksummed messages over RDS/TCP while tc
// netem degrades both directions of the veth pair, one impairment at a
// time and then all together. Three senders in the initial namespace feed
// one IPv4 receiver in the peer namespace, and one sender in the peer
// namespace feeds an IPv6 receiver in the initial namespace (the larger
// address initiating). Every accepted message must arrive exactly once, in
// order per pair, intact.
func TestLossyLinks(t *testing.T) {
	vmtest.Require(t)
	hi, hp := handles(t)
	warmUp(t)
	clear := func() {
		for _, h := range []*netlinkcfg.Handle{hi, hp} {
			if err := h.ClearQdisc(linkOf(h, hi)); err != nil {
				t.Errorf("clear netem: %v", err)
			}
		}
	}
	t.Cleanup(clear)

	const perSender = 1500 // messages per sender and case; 6000 per case
	// Each case names a TCP counter (summed over both namespaces) that
	// must move, as evidence that the impairment really hit the traffic.
	for _, tc := range []struct {
		name     string
		n        netlinkcfg.Netem
		evidence []string
	}{
		{"loss", netlinkcfg.Netem{Loss: 3}, []string{"Tcp.RetransSegs"}},
		{"delay", netlinkcfg.Netem{Delay: 15 * time.Millisecond, Jitter: 5 * time.Millisecond}, nil},
		{"duplicate", netlinkcfg.Netem{Duplicate: 5}, []string{"TcpExt.TCPDSACKOldSent"}},
		{"corrupt", netlinkcfg.Netem{Corrupt: 3}, []string{"Tcp.InCsumErrors"}},
		{"reorder", netlinkcfg.Netem{Delay: 10 * time.Millisecond, Reorder: 25}, []string{"TcpExt.TCPOFOQueue"}},
		{"combined", netlinkcfg.Netem{Loss: 1, Delay: 5 * time.Millisecond, Jitter: time.Millisecond, Duplicate: 2, Corrupt: 1, Reorder: 10},
			[]string{"Tcp.RetransSegs", "Tcp.InCsumErrors", "TcpExt.TCPOFOQueue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, h := range []*netlinkcfg.Handle{hi, hp} {
				if err := h.SetNetem(linkOf(h, hi), tc.n); err != nil {
					t.Fatalf("netem %+v: %v", tc.n, err)
				}
				if q, err := h.Qdisc(linkOf(h, hi)); err != nil || q != "netem" {
					t.Fatalf("root qdisc of %s is %q, %v; want netem", linkOf(h, hi), q, err)
				}
			}
			defer clear()
			f := newFlow(t)
			r4 := f.receiver(peer, vmtest.TCPPeer4, nil)
			r6 := f.receiver(local, vmtest.TCPLocal6, nil)
			for range 3 {
				f.sender(local, vmtest.TCPLocal4, r4, perSender, 16<<10, nil)
			}
			f.sender(peer, vmtest.TCPPeer6, r6, perSender, 16<<10, nil)
			before, tcpBefore := counters(t, r6), tcpBoth(t)
			res, took := f.run(60 * time.Second)
			after, tcpAfter := counters(t, r6), tcpBoth(t)
			var ev []string
			for _, name := range tc.evidence {
				d := tcpDelta(tcpBefore, tcpAfter, name)
				ev = append(ev, fmt.Sprintf("%s+%d", name, d))
				if d <= 0 {
					t.Errorf("TCP counter %s did not move under netem %+v: the impairment did not reach the traffic", name, tc.n)
				}
			}
			congested := 0
			for _, s := range f.senders {
				congested += s.congested
			}
			outcome := "exactly-once in order"
			if !res.clean() {
				outcome = fmt.Sprintf("FAILED unexpected=%d", res.unexpected)
			}
			logLine(t, "netem-"+tc.name, res, outcome)
			t.Logf("netem %+v: senders took %v, %d congested retries; TCP evidence %v; RDS counters: %s", tc.n, took.Round(time.Millisecond), congested, ev, nonZeroDeltas(before, after))
			if !res.clean() {
				t.Errorf("delivery under netem %+v: %+v", tc.n, res)
			}
		})
	}
}

// linkOf returns the TCP veth end that h (one of the two handles) manages.
func linkOf(h, init *netlinkcfg.Handle) string {
	if h == init {
		return vmtest.TCPLink
	}
	return vmtest.TCPPeerLink
}
