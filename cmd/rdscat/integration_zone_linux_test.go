//go:build integration

package main

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"testing"

	"github.com/go-rds/rds/integration/vmtest"
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
	idx, err := vmtest.AddAddr(nil, vmtest.TCPLink, netip.PrefixFrom(local, 64))
	if err == nil {
		_, err = vmtest.AddAddr(ns, vmtest.TCPPeerLink, netip.PrefixFrom(peer, 64))
	}
	if err != nil {
		t.Fatal(err)
	}
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
