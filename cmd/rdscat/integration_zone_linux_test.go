//go:build integration

package main

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strconv"
	"testing"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
)

// TestIntegrationRdscatPingZone pings a link-local peer across the veth
// pair with rdscat, the peer's zone spelt by name and by index: every ping
// is answered either way.
func TestIntegrationRdscatPingZone(t *testing.T) {
	requireVM(t)
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	local, peer := netip.MustParseAddr("fe80::11:1"), netip.MustParseAddr("fe80::11:2")
	idx := addAddr(t, nil, vmtest.TCPLink, netip.PrefixFrom(local, 64))
	addAddr(t, ns, vmtest.TCPPeerLink, netip.PrefixFrom(peer, 64))
	for _, zone := range []string{vmtest.TCPLink, strconv.Itoa(idx)} {
		t.Run(zone, func(t *testing.T) {
			const count = 3
			cmd := rdscatCmd(t, "ping", "-json", "-c", strconv.Itoa(count), "-i", "100ms", "-W", "2s",
				"-from", local.WithZone(vmtest.TCPLink).String(), peer.WithZone(zone).String())
			out, err := cmd.Output()
			var sum struct{ Sent, Received int }
			if jerr := json.Unmarshal(out, &sum); jerr != nil || err != nil {
				t.Fatalf("%v: %v (%v)\n%s", cmd.Args, err, jerr, out)
			}
			if sum.Sent != count || sum.Received != count {
				t.Fatalf("%v: %d sent, %d answered; want %d each", cmd.Args, sum.Sent, sum.Received, count)
			}
		})
	}
}

// addAddr puts p on link in ns (nil: the initial namespace), tolerating an
// address left from an earlier run, and returns the link's index.
func addAddr(t *testing.T, ns *netlinkcfg.Namespace, link string, p netip.Prefix) int {
	t.Helper()
	if ns == nil {
		var err error
		if ns, err = netlinkcfg.CurrentNamespace(); err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
	}
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.AddAddr(link, p); err != nil && !errors.Is(err, netlinkcfg.ErrExists) {
		t.Fatal(err)
	}
	idx, err := h.LinkIndex(link)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}
