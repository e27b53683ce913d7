package bench

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/go-rds/rds/rdssock"
)

func TestDescribeQueued(t *testing.T) {
	ap := netip.MustParseAddrPort
	ms := []rdssock.QueuedMessage{
		{Seq: 7, Local: ap("10.9.0.1:40000"), Remote: ap("10.9.0.2:20010")},
		{Seq: 8, Local: ap("10.9.0.1:20011"), Remote: ap("10.9.0.2:41000")},
		{Seq: 9, Local: ap("10.9.0.1:40000"), Remote: ap("10.9.0.2:30000")}, // another run's
	}
	if got, want := describeQueued(ms, 20010, 20019), "2 (10.9.0.1:40000->10.9.0.2:20010 seq 7, 10.9.0.1:20011->10.9.0.2:41000 seq 8)"; got != want {
		t.Errorf("describeQueued = %q, want %q", got, want)
	}
	if got := describeQueued(ms, 1, 2); got != "none" {
		t.Errorf("describeQueued of no message in range = %q, want none", got)
	}
	var many []rdssock.QueuedMessage
	for i := range 6 {
		many = append(many, rdssock.QueuedMessage{Seq: uint64(i), Local: ap("10.9.0.1:20010"), Remote: ap("10.9.0.2:1")})
	}
	if got := describeQueued(many, 20010, 20010); !strings.HasPrefix(got, "6 (") || !strings.HasSuffix(got, "seq 3, ...)") {
		t.Errorf("describeQueued of 6 = %q, want the count and the first 4", got)
	}
}
