//go:build linux

package rdmaops

import (
	"testing"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
)

// TestHandleControl: one walk over a message's control data completes its
// notices (as Tracker.Process does), returns the announced cookie and
// tells of other control data; a malformed notice stops the completions
// and is the error.
func TestHandleControl(t *testing.T) {
	tr := barrier.New(nil)
	c := &Conn{tr: tr}
	t1 := tr.Begin(barrier.Entry{})
	t2 := tr.Begin(barrier.Entry{})
	t3 := tr.Begin(barrier.Entry{})
	b := cmsg.NewBuilder(nil)
	b.RDMAStatus(cmsg.Notify{UserToken: uint64(t1), Status: cmsg.StatusSuccess})
	b.RDMADest(cmsg.Cookie(0x1234))
	b.CongUpdate(1)
	b.RDMAStatus(cmsg.Notify{UserToken: uint64(t2), Status: cmsg.StatusRemoteError})
	oob, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	dest, has, n, other, err := c.handle(oob)
	if err != nil || !has || dest != 0x1234 || n != 2 || !other {
		t.Fatalf("handle = %#x, %v, %d, %v, %v; want 0x1234, true, 2, true, nil", dest, has, n, other, err)
	}
	if s1, s2, s3 := tr.Status(t1), tr.Status(t2), tr.Status(t3); s1 != barrier.Success || s2 != barrier.RemoteError || s3 != barrier.Pending {
		t.Errorf("statuses %v %v %v; want success, remote error, pending", s1, s2, s3)
	}

	// A notice too short to decode, then a good one: neither completes.
	b = cmsg.NewBuilder(nil)
	b.Append(cmsg.LevelRDS, cmsg.TypeRDMAStatus, make([]byte, 4))
	b.RDMAStatus(cmsg.Notify{UserToken: uint64(t3), Status: cmsg.StatusSuccess})
	b.RDMADest(cmsg.Cookie(0x99))
	oob, _ = b.Finish()
	dest, has, n, _, err = c.handle(oob)
	if err == nil || n != 0 || tr.Status(t3) != barrier.Pending {
		t.Errorf("malformed notice: %d notices, %v, token %d %v; want 0, an error, pending", n, err, t3, tr.Status(t3))
	}
	if !has || dest != 0x99 {
		t.Errorf("malformed notice: the cookie after it was lost (%#x, %v)", dest, has)
	}
	if d, h, n, err := c.HandleControl(oob); err == nil || h || d != 0 || n != 0 {
		t.Errorf("HandleControl = %#x, %v, %d, %v; want no cookie and the error", d, h, n, err)
	}
}
