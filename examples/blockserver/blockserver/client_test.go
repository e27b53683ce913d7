//go:build linux

package blockserver

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
)

// fakeReg registers nothing: it hands out increasing cookies.
type fakeReg struct {
	mu   sync.Mutex
	next cmsg.Cookie
}

func (r *fakeReg) Register(context.Context, rdmaops.Span, cmsg.Flags) (cmsg.Cookie, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return r.next, nil
}
func (r *fakeReg) Deregister(cmsg.Cookie, cmsg.Flags) error { return nil }

var (
	testServerAddr = netip.MustParseAddrPort("10.22.0.2:4100")
	forger         = netip.MustParseAddrPort("10.22.0.9:4100")
	serverOtherPrt = netip.MustParseAddrPort("10.22.0.2:4101")
)

func testClient(t *testing.T) *Client {
	t.Helper()
	cl := newClient(nil, testServerAddr)
	p, err := rdmaops.NewPool(context.Background(), &fakeReg{}, 2, testBS, cmsg.FlagReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cl.pool = p
	return cl
}

func deliver(cl *Client, from netip.AddrPort, m msg) {
	var b [headerLen]byte
	cl.receive(m.encode(b[:]), from)
}

// TestClientAcceptsOnlyItsServer: a reply with the right ID from another
// address (another host, or another port of the server's host) completes
// nothing and is counted as Foreign; one from the server with an ID not
// outstanding is counted as Stray; the server's reply gets through.
func TestClientAcceptsOnlyItsServer(t *testing.T) {
	cl := testClient(t)
	b, _ := cl.pool.Get(context.Background())
	req := msg{Op: opRead, Block: 1, Buf: uint32(b.Index()), Cookie: uint64(b.Cookie())}
	c := cl.begin(&req, b)
	done := msg{Op: opReadDone, ID: req.ID, Block: 1, Buf: req.Buf}
	deliver(cl, forger, done)
	deliver(cl, serverOtherPrt, done)
	deliver(cl, testServerAddr, msg{Op: opReadDone, ID: req.ID + 1, Block: 1})
	deliver(cl, testServerAddr, msg{Op: opRelease, ID: req.ID})
	if n := len(c.ch); n != 0 {
		t.Fatalf("%d forged replies delivered", n)
	}
	if st := cl.Stats(); st.Foreign != 2 || st.Stray != 2 {
		t.Errorf("stats %+v, want 2 foreign and 2 stray", st)
	}
	// IPv4-mapped form of the server's address is the server.
	deliver(cl, netip.AddrPortFrom(netip.AddrFrom16(testServerAddr.Addr().As16()), testServerAddr.Port()), done)
	if n := len(c.ch); n != 1 {
		t.Fatalf("the server's reply was not delivered (%d)", n)
	}
	cl.end(req.ID)
	deliver(cl, testServerAddr, done) // late repeat
	if st := cl.Stats(); st.Stray != 3 {
		t.Errorf("stats %+v, want the repeat counted as stray", st)
	}
}

// TestClientRandomIDs: request IDs are neither sequential nor zero, and
// never collide with a call still held.
func TestClientRandomIDs(t *testing.T) {
	cl := testClient(t)
	const n = 2000
	seen := map[uint32]bool{}
	var prev uint32
	seq := 0
	for range n {
		m := msg{Op: opPing}
		cl.begin(&m, nil)
		if m.ID == 0 || seen[m.ID] {
			t.Fatalf("ID %d zero or repeated", m.ID)
		}
		if m.ID == prev+1 {
			seq++
		}
		seen[m.ID], prev = true, m.ID
	}
	if seq > 1 {
		t.Errorf("%d of %d IDs followed their predecessor", seq, n)
	}
	// Another client draws other IDs.
	other := newClient(nil, testServerAddr)
	same := 0
	for range 8 {
		m := msg{Op: opPing}
		other.begin(&m, nil)
		if seen[m.ID] {
			same++
		}
	}
	if same > 1 {
		t.Errorf("%d of another client's 8 IDs were this client's", same)
	}
}

// TestClientHeldBuffer: an errHeld reply quarantines the buffer (key
// revoked, not lent) until the server's release message; a forged release
// changes nothing; the real one registers the buffer anew.
func TestClientHeldBuffer(t *testing.T) {
	cl := testClient(t)
	ctx := context.Background()
	b, _ := cl.pool.Get(ctx)
	old := b.Cookie()
	req := msg{Op: opWrite, Block: 2, Buf: uint32(b.Index()), Cookie: uint64(old)}
	c := cl.begin(&req, b)
	deliver(cl, testServerAddr, msg{Op: opError, Status: errHeld, ID: req.ID, Block: 2})
	r, err := wait(ctx, c.ch)
	if !errors.Is(err, ErrServer) || r.Status != errHeld {
		t.Fatalf("wait: %+v, %v", r, err)
	}
	cl.settle(req.ID, b, r, err, true)
	cl.end(req.ID)
	if b.State() != rdmaops.Quarantined {
		t.Fatalf("buffer %v after errHeld, want quarantined", b.State())
	}
	deliver(cl, forger, msg{Op: opRelease, ID: req.ID})
	deliver(cl, testServerAddr, msg{Op: opWriteDone, ID: req.ID}) // held calls wait for the release only
	cl.confirms.Wait()
	if b.State() != rdmaops.Quarantined {
		t.Fatalf("buffer %v after a forged release, want quarantined", b.State())
	}
	deliver(cl, testServerAddr, msg{Op: opRelease, ID: req.ID})
	cl.confirms.Wait()
	if b.State() != rdmaops.Available || b.Cookie() == old {
		t.Fatalf("buffer %v cookie %v after the release (old %v), want available under a new key", b.State(), b.Cookie(), old)
	}
	if st := cl.Stats(); st.Foreign != 1 || st.Stray != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestClientAbandonedBuffer: a call the caller gave up on keeps its buffer
// quarantined until the server answers; an answer of errHeld extends that
// to the release message.
func TestClientAbandonedBuffer(t *testing.T) {
	for _, late := range []string{"read done", "held then release"} {
		t.Run(late, func(t *testing.T) {
			cl := testClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			b, _ := cl.pool.Get(ctx)
			req := msg{Op: opRead, Block: 2, Buf: uint32(b.Index()), Cookie: uint64(b.Cookie())}
			c := cl.begin(&req, b)
			cancel()
			r, err := wait(ctx, c.ch)
			cl.settle(req.ID, b, r, err, true)
			cl.end(req.ID)
			if b.State() != rdmaops.Quarantined {
				t.Fatalf("buffer %v after giving up, want quarantined", b.State())
			}
			if late == "read done" {
				deliver(cl, testServerAddr, msg{Op: opReadDone, ID: req.ID, Block: 2})
			} else {
				deliver(cl, testServerAddr, msg{Op: opError, Status: errHeld, ID: req.ID})
				cl.confirms.Wait()
				if b.State() != rdmaops.Quarantined {
					t.Fatalf("buffer %v after errHeld, want quarantined", b.State())
				}
				deliver(cl, testServerAddr, msg{Op: opRelease, ID: req.ID})
			}
			cl.confirms.Wait()
			if b.State() != rdmaops.Available {
				t.Fatalf("buffer %v after the late answer, want available", b.State())
			}
		})
	}
}

// TestClientTransferError: status 2 says the transfer is over; the buffer
// returns under a new key at once. A refusal returns it as it is.
func TestClientTransferError(t *testing.T) {
	cl := testClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		status uint8
		rekey  bool
	}{{errTransfer, true}, {errLimit, false}} {
		b, _ := cl.pool.Get(ctx)
		old := b.Cookie()
		req := msg{Op: opRead, Block: 2, Buf: uint32(b.Index()), Cookie: uint64(old)}
		c := cl.begin(&req, b)
		deliver(cl, testServerAddr, msg{Op: opError, Status: tc.status, ID: req.ID})
		r, err := wait(ctx, c.ch)
		cl.settle(req.ID, b, r, err, true)
		cl.end(req.ID)
		if b.State() != rdmaops.Available || (b.Cookie() != old) != tc.rekey {
			t.Errorf("status %d: buffer %v, cookie %v (was %v)", tc.status, b.State(), b.Cookie(), old)
		}
	}
}
