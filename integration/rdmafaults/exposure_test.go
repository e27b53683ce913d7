//go:build integration

package rdmafaults

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
)

// vma is a mapping from /proc/self/smaps.
type vma struct {
	start, end uintptr
	flags      string
}

// vmaOf returns the mapping that contains addr.
func vmaOf(t *testing.T, addr uintptr) vma {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cur vma
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			if found {
				break
			}
			lo, hi, _ := strings.Cut(r, "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			cur = vma{start: uintptr(s), end: uintptr(e)}
			found = addr >= cur.start && addr < cur.end
			continue
		}
		if found && strings.HasPrefix(line, "VmFlags:") {
			cur.flags = strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	if !found {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return cur
}

// TestRegistrationExposure registers 100 bytes of a two-page region and
// shows what a peer can reach with the cookie: the registration exposes
// the whole first page (RDS registers whole pages; measured), never the
// second page, and the region's pages are its own: a mapping of their own
// outside the Go heap (MADV_DONTFORK shows as "dc" in VmFlags, which the
// Go runtime never sets). READs beyond the registered pages and a WRITE
// into a read-only key fail with a remote access error and return or
// change no bytes.
func TestRegistrationExposure(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := os.Getpagesize()

	creg := newRegion(t, 2*ps)
	t.Cleanup(func() { creg.Close() })
	fillByte(creg.Bytes()[:100], 'R')   // the registered span
	fillByte(creg.Bytes()[100:ps], 'P') // the rest of its page
	fillByte(creg.Bytes()[ps:], 'S')    // the next page: never exposed
	base := uintptr(unsafe.Pointer(&creg.Bytes()[0]))
	if base%uintptr(ps) != 0 || creg.Len()%ps != 0 {
		t.Fatalf("region at %#x, %d bytes: not whole pages", base, creg.Len())
	}
	m := vmaOf(t, base)
	heap := new([64]byte)
	hp := uintptr(unsafe.Pointer(heap))
	if m.start > base || m.end < base+uintptr(creg.Len()) || !strings.Contains(" "+m.flags+" ", " dc ") || (hp >= m.start && hp < m.end) {
		t.Fatalf("region [%#x, %#x) lies in mapping [%#x, %#x) flags %q; a heap object is at %#x", base, base+uintptr(creg.Len()), m.start, m.end, m.flags, hp)
	}
	t.Logf("region [%#x, %#x): mapping [%#x, %#x), VmFlags %q (dc: excluded from fork, never Go heap)", base, base+uintptr(creg.Len()), m.start, m.end, m.flags)

	var c tally
	p := newPair(t, ctx)
	_, ck := p.register(t, ctx, creg.Span(0, 100), 0) // read-only for the peer
	sreg := newRegion(t, 2*ps)
	defer sreg.Close()
	local := sreg.Span(0, 2*ps)
	read := func(p *pair, ck cmsg.Cookie, off, n int) (barrier.Status, []byte) {
		fillByte(sreg.Bytes(), 0x5A)
		st := p.read(t, ctx, ck, uint64(off), local.Slice(0, n), 10*time.Second)
		c.add(st)
		return st, sreg.Bytes()[:n]
	}
	if st, got := read(p, ck, 0, 100); st != barrier.Success || !allByte(got, 'R') {
		t.Fatalf("READ of the registered 100 bytes: %v", st)
	}
	st, got := read(p, ck, 0, ps)
	wholePage := st == barrier.Success && allByte(got[:100], 'R') && allByte(got[100:], 'P')
	t.Logf("READ of the whole first page through a 100-byte registration: %v (whole page exposed: %v)", st, wholePage)
	if st != barrier.Success {
		p = newPair(t, ctx)
		_, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	}
	for _, o := range []struct {
		name   string
		off, n int
	}{
		{"READ across into the next page", 0, 2 * ps},
		{"READ of the next page", ps, 64},
		{"READ at an offset past the registration's end", 2 * ps, 64},
	} {
		st, got := read(p, ck, o.off, o.n)
		if st != barrier.RemoteError || !allByte(got, 0x5A) {
			t.Errorf("%s: %v; local buffer untouched: %v", o.name, st, allByte(got, 0x5A))
		}
		if strings.Contains(string(got), "SSSS") {
			t.Errorf("%s: bytes of the unregistered page reached the peer", o.name)
		}
		p = newPair(t, ctx) // the access error tore the connection down
		_, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	}
	// A WRITE into a read-only registration.
	fillByte(sreg.Bytes(), 'W')
	st = p.write(t, ctx, ck, 0, sreg.Span(0, 100), "w", 10*time.Second)
	c.add(st)
	if st != barrier.RemoteError || !allByte(creg.Bytes()[:100], 'R') || !allByte(creg.Bytes()[100:ps], 'P') || !allByte(creg.Bytes()[ps:], 'S') {
		t.Errorf("WRITE into a read-only key: %v; memory unchanged: %v", st, allByte(creg.Bytes()[:100], 'R'))
	}
	if m, ok := p.client.tryRecv(200 * time.Millisecond); ok {
		t.Errorf("immediate data %q of the refused write was delivered", m.data)
	}
	// The process keeps serving: a fresh connection works.
	p = newPair(t, ctx)
	_, ck = p.register(t, ctx, creg.Span(0, 100), 0)
	if st, got := read(p, ck, 0, 100); st != barrier.Success || !allByte(got, 'R') {
		t.Fatalf("READ on a fresh connection after the faults: %v", st)
	}
	page := "only the registered page"
	if wholePage {
		page = "the whole first page (RDS registers whole pages)"
	}
	reliability(t, "exposure/out-of-range-and-permissions", c, "peer reached "+page+"; beyond it and writes to a read-only key refused, no bytes moved")
}

// TestBogusAndStaleCookies: RDMA with a cookie the owner never issued, and
// with a freed key after the owner's peer acknowledged the registration,
// fail with a remote access error. The error tears the RDS/IB connection
// down; the test measures how long until a message and an RDMA get
// through on that connection again, and shows that a fresh connection
// (another TOS) works at once.
func TestBogusAndStaleCookies(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := os.Getpagesize()
	creg := newRegion(t, ps)
	t.Cleanup(func() { creg.Close() })
	fillByte(creg.Bytes(), 'K')
	sreg := newRegion(t, ps)
	defer sreg.Close()
	local := sreg.Span(0, 64)
	var c tally

	// Stale: freed, acknowledged (any message from the peer carries the
	// acknowledgement of the registration message), a second later.
	p := newPair(t, ctx)
	mr, stale := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite|cmsg.FlagInvalidate)
	mr.Free()
	p.server.sock.WriteMsgContext(ctx, []byte("ack"), nil, p.client.addr())
	p.client.recv(t, "ack", 10*time.Second)
	time.Sleep(time.Second)
	fillByte(sreg.Bytes(), 'X')
	st := p.write(t, ctx, stale, 0, local, "stale", 10*time.Second)
	c.add(st)
	if st != barrier.RemoteError || !allByte(creg.Bytes(), 'K') {
		t.Errorf("write with a stale cookie: %v; memory unchanged: %v", st, allByte(creg.Bytes(), 'K'))
	}

	// Bogus: a key never issued.
	p = newPair(t, ctx)
	mr, good := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite)
	defer mr.Free()
	bogus := cmsg.MakeCookie(good.RKey()^0x5a5a00, 0)
	start := time.Now()
	st = p.write(t, ctx, bogus, 0, local, "bogus", 10*time.Second)
	c.add(st)
	t.Logf("bogus cookie: %v after %v", st, time.Since(start))
	if st != barrier.RemoteError || !allByte(creg.Bytes(), 'K') {
		t.Errorf("write with a bogus cookie: %v; memory unchanged: %v", st, allByte(creg.Bytes(), 'K'))
	}
	reliability(t, "cookies/bogus-and-stale", c, "both refused with remote error, memory unchanged")

	// Recovery of the torn-down connection, same TOS, same sockets.
	var rc tally
	const limit = 20 * time.Second
	start = time.Now()
	var msgAt, rdmaAt time.Duration
	for n := 0; time.Since(start) < limit && (msgAt == 0 || rdmaAt == 0); n++ {
		if msgAt == 0 {
			p.client.sock.WriteMsgContext(ctx, []byte(fmt.Sprintf("ping %d", n)), nil, p.server.addr())
			if m, ok := p.server.tryRecv(500 * time.Millisecond); ok && strings.HasPrefix(string(m.data), "ping") {
				msgAt = time.Since(start)
			}
		}
		if rdmaAt == 0 {
			st := p.write(t, ctx, good, 0, local, "retry", 2*time.Second)
			rc.add(st)
			if st == barrier.Success {
				rdmaAt = time.Since(start)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	conns, _ := p.server.sock.Connections()
	var state []string
	for _, cn := range conns {
		if cn.TOS == p.tos {
			state = append(state, fmt.Sprintf("%v->%v flags %#x", cn.Local, cn.Remote, cn.Flags))
		}
	}
	if msgAt == 0 {
		t.Logf("blocked tasks:\n%s", strings.Join(dumpBlocked(), "\n"))
	}
	out := fmt.Sprintf("same TOS after the error: message through after %v, RDMA after %v (0 = not within %v); connection rows %v", msgAt, rdmaAt, limit, state)
	t.Log(out)
	reliability(t, "cookies/recovery-same-connection", rc, out)

	// A fresh connection works at once.
	p = newPair(t, ctx)
	mr2, good2 := p.register(t, ctx, creg.Span(0, ps), cmsg.FlagReadWrite)
	defer mr2.Free()
	fillByte(sreg.Bytes(), 'Y')
	var fc tally
	st = p.write(t, ctx, good2, 0, local, "fresh", 10*time.Second)
	fc.add(st)
	if st != barrier.Success || !allByte(creg.Bytes()[:64], 'Y') {
		t.Fatalf("write on a fresh connection: %v", st)
	}
	reliability(t, "cookies/fresh-connection", fc, fmt.Sprintf("valid write on a new TOS succeeded; connection up in %v", p.upIn))
}
