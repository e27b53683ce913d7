//go:build linux

package cli

import (
	"net/netip"
	"strings"
	"testing"
)

func TestDeliveryNote(t *testing.T) {
	dst := netip.MustParseAddrPort("10.11.0.2:4000")
	before := map[string]uint64{"recv_queued": 100, "recv_drop_no_sock": 7, "recv_drop_dead_sock": 1}
	for _, c := range []struct {
		name  string
		after map[string]uint64
		want  []string
		not   []string
	}{
		{"dropped", map[string]uint64{"recv_queued": 100, "recv_drop_no_sock": 10, "recv_drop_dead_sock": 1},
			[]string{"recv_queued +0, recv_drop_no_sock +3, recv_drop_dead_sock +0", "warning: this host's kernel dropped 3 messages for want of a socket", "nothing is bound at 10.11.0.2:4000"},
			nil},
		{"queued here", map[string]uint64{"recv_queued": 103, "recv_drop_no_sock": 7, "recv_drop_dead_sock": 1},
			[]string{"recv_queued +3, recv_drop_no_sock +0", "its socket queued them"},
			[]string{"warning"}},
		{"elsewhere", map[string]uint64{"recv_queued": 100, "recv_drop_no_sock": 7, "recv_drop_dead_sock": 1},
			[]string{"recv_queued +0", "is on another host", `"rdscat info counters" there`},
			[]string{"warning"}},
	} {
		got := deliveryNote(dst, 3, before, c.after)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: %q says %q", c.name, got, w)
			}
		}
	}
}
