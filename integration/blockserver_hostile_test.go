//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// The block server's wire format, as its package documentation specifies
// it: a hostile peer writes bytes, not Go values.
const (
	bsPing, bsPong, bsRead, bsReadDone, bsWrite = 1, 2, 3, 4, 5
	bsWriteFetched, bsWriteDone, bsError        = 6, 7, 8
	bsAnnounce                                  = 12
	bsLen                                       = 64
)

type bsMsg struct {
	op, status uint8
	aux        uint16
	id         uint32
	block      uint64
	buf, crc   uint32
	cookie     uint64
}

func (m bsMsg) bytes() []byte {
	b := make([]byte, bsLen)
	b[0], b[1] = m.op, m.status
	binary.LittleEndian.PutUint16(b[2:], m.aux)
	binary.LittleEndian.PutUint32(b[4:], m.id)
	binary.LittleEndian.PutUint64(b[8:], m.block)
	binary.LittleEndian.PutUint32(b[16:], m.buf)
	binary.LittleEndian.PutUint32(b[20:], m.crc)
	binary.LittleEndian.PutUint64(b[24:], m.cookie)
	return b
}

func parseBS(b []byte) (bsMsg, bool) {
	if len(b) != bsLen {
		return bsMsg{}, false
	}
	return bsMsg{
		op: b[0], status: b[1], aux: binary.LittleEndian.Uint16(b[2:]), id: binary.LittleEndian.Uint32(b[4:]),
		block: binary.LittleEndian.Uint64(b[8:]), buf: binary.LittleEndian.Uint32(b[16:]),
		crc: binary.LittleEndian.Uint32(b[20:]), cookie: binary.LittleEndian.Uint64(b[24:]),
	}, true
}

// TestBlockServerHostile runs a block server on one Soft-RoCE address and
// attacks it from the other with malformed requests: empty, truncated,
// oversized (also beyond the server's receive buffer), unknown opcodes,
// blocks out of range, bogus, stale and never-announced cookies,
// announcements without a cookie or beyond the buffer limit, and a
// message of a reply kind. Each gets the error reply with the status and
// detail the package documents (the reply kind none), counted by reason;
// in between, valid RDMA reads and writes from the same socket succeed
// with the right bytes; afterwards an ordinary client runs a random
// workload and both sides agree on the file's SHA-256.
func TestBlockServerHostile(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const (
		bsize   = 4096
		nblocks = 16
		seed    = 5
	)
	server := netip.AddrPortFrom(vmtest.IBAddr2, 4860)
	path := filepath.Join(t.TempDir(), "blocks.img")
	model := blockserver.Content(seed, nblocks*bsize)
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ssock, err := rdssock.Listen(server, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ssock.Close()
	srv, err := blockserver.NewServer(ssock, f, &blockserver.ServerConfig{BlockSize: bsize})
	if err != nil {
		t.Fatal(err)
	}
	type served struct {
		sum [32]byte
		err error
	}
	done := make(chan served, 1)
	go func() {
		sum, err := srv.Serve(ctx)
		done <- served{sum, err}
	}()

	// The attacker: a raw socket, with RDMA registrations of its own.
	hsock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr1, 4861), &rdssock.Config{SendBuffer: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer hsock.Close()
	rbuf, oob := make([]byte, 8192), make([]byte, cmsg.MaxReceiveSpace)
	send := func(b []byte) {
		t.Helper()
		if _, err := hsock.WriteMsgContext(ctx, b, nil, server, 0); err != nil {
			t.Fatalf("send %d bytes: %v", len(b), err)
		}
	}
	// next returns the next message from the server, skipping notices.
	next := func(wait time.Duration) (bsMsg, error) {
		rctx, rcancel := context.WithTimeout(ctx, wait)
		defer rcancel()
		for {
			n, _, _, from, err := hsock.ReadMsgContext(rctx, rbuf, oob, 0)
			if err != nil {
				return bsMsg{}, err
			}
			if n == 0 || from != server {
				continue
			}
			m, ok := parseBS(rbuf[:n])
			if !ok {
				return bsMsg{}, errors.New("a reply that is not 64 bytes")
			}
			return m, nil
		}
	}
	// The server may still be starting, and the IB connection coming up.
	for i := 0; ; i++ {
		send(bsMsg{op: bsPing, id: 1}.bytes())
		if m, err := next(time.Second); err == nil && m.op == bsPong && m.id == 1 {
			if m.block != nblocks || m.buf != bsize {
				t.Fatalf("pong says %d blocks of %d", m.block, m.buf)
			}
			break
		}
		if i == 30 {
			t.Fatal("no pong from the block server within 30 s")
		}
	}

	// Two registrations of the attacker's buffer 0, both announced: the
	// second makes the first cookie stale.
	region, err := rdmaops.NewRegion(bsize)
	if err != nil {
		t.Fatal(err)
	}
	rc := rdmaops.New(hsock, nil, nil)
	announce := func(buf uint32) cmsg.Cookie {
		t.Helper()
		mr, err := rc.Register(ctx, region.Span(0, bsize), cmsg.FlagReadWrite, server, bsMsg{op: bsAnnounce, buf: buf}.bytes())
		if err != nil {
			t.Fatalf("register and announce buffer %d: %v", buf, err)
		}
		return mr.Cookie()
	}
	stale := announce(0)
	fresh := announce(0)
	if stale == fresh {
		t.Fatalf("two registrations share cookie %v", stale)
	}

	valid := func(id uint32) {
		t.Helper()
		// A valid read of block 2 into buffer 0 under the fresh cookie.
		send(bsMsg{op: bsRead, id: id, block: 2, buf: 0, cookie: uint64(fresh)}.bytes())
		m, err := next(20 * time.Second)
		if err != nil || m.op != bsReadDone || m.id != id {
			t.Fatalf("valid read %d: %+v, %v", id, m, err)
		}
		want := model[2*bsize : 3*bsize]
		if !bytes.Equal(region.Bytes()[:bsize], want) || m.crc != crc32.ChecksumIEEE(want) {
			t.Fatalf("valid read %d: block 2 did not land intact", id)
		}
		clear(region.Bytes())
	}
	valid(2)

	long := bsMsg{op: bsPing, id: 104}.bytes()
	huge := append(bsMsg{op: bsRead, id: 105, cookie: uint64(fresh)}.bytes(), make([]byte, 8000-bsLen)...)
	cases := []struct {
		name   string
		msg    []byte
		id     uint32
		status uint8
		aux    uint16
	}{
		{"zero-length", nil, 0, 5, 3},
		{"truncated to 10 bytes", bsMsg{op: bsRead, id: 101, cookie: uint64(fresh)}.bytes()[:10], 101, 5, 1},
		{"truncated to 3 bytes", bsMsg{op: bsRead, id: 102}.bytes()[:3], 0, 5, 1},
		{"63 bytes", bsMsg{op: bsPing, id: 103}.bytes()[:63], 103, 5, 1},
		{"oversized: 100 bytes", append(long, make([]byte, 36)...), 104, 5, 2},
		{"oversized: 8000 bytes, beyond the receive buffer", huge, 105, 5, 2},
		{"unknown opcode 200", bsMsg{op: 200, id: 106}.bytes(), 106, 6, 200},
		{"opcode 0", bsMsg{op: 0, id: 107}.bytes(), 107, 6, 0},
		{"block out of range", bsMsg{op: bsRead, id: 108, block: nblocks, cookie: uint64(fresh)}.bytes(), 108, 1, 0},
		{"block 2^64-1, write", bsMsg{op: bsWrite, id: 109, block: 1<<64 - 1, cookie: uint64(fresh)}.bytes(), 109, 1, 0},
		{"bogus cookie", bsMsg{op: bsRead, id: 110, block: 1, cookie: 0xdeadbeef}.bytes(), 110, 7, 0},
		{"stale cookie", bsMsg{op: bsRead, id: 111, block: 1, cookie: uint64(stale)}.bytes(), 111, 7, 0},
		{"write with the stale cookie", bsMsg{op: bsWrite, id: 112, block: 1, cookie: uint64(stale)}.bytes(), 112, 7, 0},
		{"buffer never announced", bsMsg{op: bsRead, id: 113, block: 1, buf: 3, cookie: uint64(fresh)}.bytes(), 113, 7, 0},
		{"announcement without a cookie", bsMsg{op: bsAnnounce, buf: 1}.bytes(), 0, 5, 4},
	}
	for i, c := range cases {
		send(c.msg)
		m, err := next(10 * time.Second)
		if err != nil {
			t.Fatalf("%s: no reply: %v", c.name, err)
		}
		if m.op != bsError || m.id != c.id || m.status != c.status || m.aux != c.aux {
			t.Errorf("%s: reply %+v, want error ID %d status %d aux %d", c.name, m, c.id, c.status, c.aux)
		}
		if i%4 == 3 {
			valid(uint32(200 + i)) // still serving
		}
	}
	// An announcement beyond the buffer limit, with a real cookie.
	announce(blockserver.MaxBuffers)
	if m, err := next(10 * time.Second); err != nil || m.op != bsError || m.status != 8 || m.aux != 2 {
		t.Errorf("announcement of buffer %d: %+v, %v; want error status 8 aux 2", blockserver.MaxBuffers, m, err)
	}
	// A message of a reply kind is dropped without an answer: the next
	// reply is the pong.
	send(bsMsg{op: bsError, id: 300, status: 1}.bytes())
	send(bsMsg{op: bsPing, id: 301}.bytes())
	if m, err := next(10 * time.Second); err != nil || m.op != bsPong || m.id != 301 {
		t.Errorf("after a reply-kind message: %+v, %v; want the pong to ping 301", m, err)
	}

	// A valid write from the attacker's socket: block 3 from buffer 0.
	data := blockserver.Content(99, bsize)
	copy(region.Bytes(), data)
	send(bsMsg{op: bsWrite, id: 400, block: 3, buf: 0, cookie: uint64(fresh), crc: crc32.ChecksumIEEE(data)}.bytes())
	for _, want := range []uint8{bsWriteFetched, bsWriteDone} {
		if m, err := next(20 * time.Second); err != nil || m.op != want || m.id != 400 {
			t.Fatalf("valid write: %+v, %v; want kind %d", m, err, want)
		}
	}
	copy(model[3*bsize:], data)

	st := srv.Stats()
	t.Logf("server stats after the attack: %+v", st)
	wantStats := blockserver.ServerStats{
		Reads: st.Reads, Writes: 1, Syncs: 1,
		Short: 3, Long: 2, Empty: 1, UnknownOps: 3, Dropped: 1, BadBlocks: 2, BadCookies: 4, NoCookie: 1, OverLimit: 1,
		Announcements: 2,
		Errors:        3 + 2 + 1 + 2 + 2 + 4 + 1 + 1, // every refusal but the dropped one
	}
	if st != wantStats {
		t.Errorf("server stats\n %+v, want\n %+v", st, wantStats)
	}
	if want := uint64(1 + len(cases)/4); st.Reads != want {
		t.Errorf("%d reads served, want %d", st.Reads, want)
	}

	// An ordinary client afterwards: a random workload, then checksums.
	csock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr1, 4862), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer csock.Close()
	cl, err := blockserver.Dial(ctx, csock, server, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The block server refuses a bad block to a real client with an
	// error that says why.
	if err := cl.ReadBlock(ctx, nblocks+5, func([]byte) error { return nil }); !errors.Is(err, blockserver.ErrServer) {
		t.Errorf("ReadBlock out of range: %v, want ErrServer", err)
	} else {
		t.Logf("out-of-range read: %v", err)
	}
	res, err := blockserver.Workload(ctx, cl, model, 200, 4, seed)
	if err != nil {
		t.Fatalf("workload after the attack: %v", err)
	}
	sum, err := cl.Sum(ctx)
	if err != nil || sum != res.Sum {
		t.Fatalf("server's SHA-256 %x (%v), the model's %x", sum, err, res.Sum)
	}
	if err := cl.Bye(ctx, res.Sum); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Serve: %v", r.err)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(disk) != r.sum {
		t.Fatal("the file's SHA-256 differs from the client's")
	}
	t.Logf("after the attack: %d reads and %d writes by a client in %v; file SHA-256 %x on both sides", res.Reads, res.Writes, res.Duration, r.sum)
}
