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

// TestHandleNoticesInPlace: notices read in place (headNotices) complete
// their operations as a parsed walk would, and a malformed message after
// them gives the error a cmsg.Parser gives for the whole buffer, at the
// same offset.
func TestHandleNoticesInPlace(t *testing.T) {
	tr := barrier.New(nil)
	c := &Conn{tr: tr}
	var toks [4]barrier.Token
	for i := range toks {
		toks[i] = tr.Begin(barrier.Entry{})
	}
	b := cmsg.NewBuilder(nil)
	for _, tok := range toks[:3] {
		b.RDMAStatus(cmsg.Notify{UserToken: uint64(tok), Status: cmsg.StatusSuccess})
	}
	oob, _ := b.Finish()
	if _, has, n, other, err := c.handle(oob); err != nil || has || n != 3 || other {
		t.Fatalf("three notices: handle = %v, %d, %v, %v; want no cookie, 3, false, nil", has, n, other, err)
	}
	for _, tok := range toks[:3] {
		if s := tr.Status(tok); s != barrier.Success {
			t.Errorf("token %d: %v, want success", tok, s)
		}
	}

	// A notice, then one whose length runs past the buffer.
	b = cmsg.NewBuilder(nil)
	b.RDMAStatus(cmsg.Notify{UserToken: uint64(toks[3]), Status: cmsg.StatusRemoteError})
	b.RDMAStatus(cmsg.Notify{UserToken: 12345, Status: cmsg.StatusSuccess})
	oob, _ = b.Finish()
	oob = oob[:len(oob)-4]
	p := cmsg.NewParser(oob)
	p.Next()
	_, want := p.Next()
	_, _, n, _, err := c.handle(oob)
	if n != 1 || err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("a notice and a cut one: handle = %d, %v; want 1, %v", n, err, want)
	}
	if s := tr.Status(toks[3]); s != barrier.RemoteError {
		t.Errorf("the whole notice: %v, want remote error", s)
	}
}
