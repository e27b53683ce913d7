//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

const (
	bsRelease     = 13
	bsErrLimit    = 8
	bsErrTransfer = 2 // the RDMA failed; its barrier status in aux
	bsNotSent     = 7 // barrier.NotSent: the server's sendmsg refused it
)

// bsServer runs a block server on IBAddr2:port over a file of nblocks
// blocks of bsize bytes; it is closed when the test ends.
func bsServer(t *testing.T, ctx context.Context, port uint16, nblocks, bsize int, cfg blockserver.ServerConfig) (*blockserver.Server, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blocks.img")
	model := blockserver.Content(uint64(port), nblocks*bsize)
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr2, port), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BlockSize = bsize
	srv, err := blockserver.NewServer(sock, f, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := srv.Serve(sctx)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
		sock.Close()
		f.Close()
	})
	return srv, model
}

// rawPeer is a hand-driven block-server client: a socket with one
// registered buffer announced as buffer 0.
type rawPeer struct {
	sock   *rdssock.Conn
	c      *rdmaops.Conn
	cookie cmsg.Cookie
}

func newRawPeer(t *testing.T, ctx context.Context, local, server netip.AddrPort, cfg *rdssock.Config, bsize int) *rawPeer {
	t.Helper()
	sock, err := rdssock.Listen(local, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	p := &rawPeer{sock: sock, c: rdmaops.New(sock, nil, nil)}
	// Ping until the server answers, then register and announce.
	buf, oob := make([]byte, 256), make([]byte, cmsg.MaxReceiveSpace)
	for i := 0; ; i++ {
		if _, err := sock.WriteMsgContext(ctx, bsMsg{op: bsPing, id: 1}.bytes(), nil, server, 0); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		n, _, _, from, err := sock.ReadMsgContext(rctx, buf, oob, 0)
		cancel()
		if err == nil && from == server {
			if m, ok := parseBS(buf[:n]); ok && m.op == bsPong {
				break
			}
		}
		if i == 30 {
			t.Fatal("no pong from the block server within 30 s")
		}
	}
	region, err := rdmaops.NewRegion(bsize)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := p.c.Register(ctx, region.Span(0, bsize), cmsg.FlagReadWrite, server, bsMsg{op: bsAnnounce}.bytes())
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	p.cookie = mr.Cookie()
	return p
}

// latencies summarises durations: median and maximum.
func latencies(d []time.Duration) (p50, worst time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)-1]
}

// readLoop reads random blocks with cl until stop is closed, checking each
// against model, and returns the latencies.
func readLoop(t *testing.T, ctx context.Context, cl *blockserver.Client, model []byte, stop <-chan struct{}, notSent *atomic.Int64) ([]time.Duration, error) {
	bs := cl.BlockSize()
	r := rand.New(rand.NewPCG(1, 2))
	var lat []time.Duration
	for {
		select {
		case <-stop:
			return lat, nil
		default:
		}
		blk := r.Uint64N(cl.Blocks())
		start := time.Now()
		err := cl.ReadBlock(ctx, blk, func(data []byte) error {
			if !bytes.Equal(data, model[int(blk)*bs:int(blk+1)*bs]) {
				return errors.New("block differs from the file")
			}
			return nil
		})
		if err != nil {
			// A transfer that the server's kernel would not take (its
			// send buffer full of a flooder's refusals: barrier.NotSent)
			// is a server-side failure of that one request; the client
			// asks again, as a real one would, and the caller counts it.
			if errors.Is(err, blockserver.ErrServer) && strings.Contains(err.Error(), fmt.Sprintf("barrier status %d", bsNotSent)) {
				notSent.Add(1)
				continue
			}
			return lat, err
		}
		lat = append(lat, time.Since(start))
	}
}

// TestBlockServerBacklogFlood: a client floods the server with read
// requests for 5 s. The server's heap and goroutine count stay bounded,
// the flood gets explicit backlog-full replies (every request is
// answered, but for those beyond the flooder's refusals for the second,
// which the server counts as unanswered), and another client keeps being
// served; its latency before and during the flood is logged.
func TestBlockServerBacklogFlood(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const (
		port    = 4870
		bsize   = 4096
		nblocks = 32
	)
	server := netip.AddrPortFrom(vmtest.IBAddr2, port)
	srv, model := bsServer(t, ctx, port, nblocks, bsize, blockserver.ServerConfig{Slots: 4, Backlog: 32, ClientBacklog: 8})

	// The flood congests the server's port (its receive queue is full
	// more often than not), which refuses every sender's messages; both
	// clients wait for the congestion to clear instead of failing.
	csock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr1, port+2), &rdssock.Config{WaitCongested: true})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := blockserver.Dial(ctx, csock, server, &blockserver.ClientConfig{Buffers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stopBase := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stopBase) })
	var baseNotSent, floodNotSent atomic.Int64
	base, err := readLoop(t, ctx, cl, model, stopBase, &baseNotSent)
	if err != nil {
		t.Fatalf("reads before the flood: %v", err)
	}

	flooder := newRawPeer(t, ctx, netip.AddrPortFrom(vmtest.IBAddr1, port+1), server, &rdssock.Config{SendBuffer: 1 << 20, WaitCongested: true}, bsize)
	var got, done, busy, notSentReplies, other atomic.Int64
	go func() {
		buf, oob := make([]byte, 256), make([]byte, 64*cmsg.RDMAStatusSpace)
		for {
			n, _, _, from, err := flooder.sock.ReadMsg(buf, oob)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			m, ok := parseBS(buf[:n])
			if from != server || !ok {
				continue
			}
			got.Add(1)
			switch {
			case m.op == bsReadDone:
				done.Add(1)
			case m.op == bsError && m.status == bsErrLimit && (m.aux == 3 || m.aux == 4):
				busy.Add(1)
			case m.op == bsError && m.status == bsErrTransfer && m.aux == bsNotSent:
				// The server's send buffer was full of refusals to
				// this flooder (or its port congested): the transfer
				// failed to send, and said so.
				notSentReplies.Add(1)
			default:
				other.Add(1)
			}
		}
	}()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0, gor0 := ms.HeapAlloc, runtime.NumGoroutine()
	var heapMax uint64
	gorMax := 0
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heapMax = max(heapMax, ms.HeapAlloc)
				gorMax = max(gorMax, runtime.NumGoroutine())
			}
		}
	}()

	// Two floods of 5 s each: one paced at about 1,000 requests/s, several
	// times what the server can serve by RDMA but less than it can
	// receive and refuse; then one as fast as the flooder can send, which
	// fills the server's receive queue so that RDS congestion control
	// decides who gets through.
	const floodFor = 5 * time.Second
	sent := 0
	for _, paced := range []bool{true, false} {
		stop := make(chan struct{})
		var during []time.Duration
		var duringErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			during, duringErr = readLoop(t, ctx, cl, model, stop, &floodNotSent)
		}()
		st0, got0, busy0 := srv.Stats(), got.Load(), busy.Load()
		first := sent
		start := time.Now()
		for time.Since(start) < floodFor {
			if paced && time.Duration(sent-first)*time.Millisecond > time.Since(start) {
				time.Sleep(time.Millisecond)
				continue
			}
			m := bsMsg{op: bsRead, id: uint32(sent + 1), block: uint64(sent % nblocks), cookie: uint64(flooder.cookie)}
			if _, err := flooder.sock.WriteMsgContext(ctx, m.bytes(), nil, server, 0); err != nil {
				t.Fatalf("flood message %d: %v", sent, err)
			}
			sent++
		}
		floodTook := time.Since(start)
		close(stop)
		wg.Wait()
		// Every request is answered, or its answer counted unsent (the
		// server's send buffer was full) or unanswered (the flooder's
		// refusals for the second were spent): wait for that, not for
		// the answers alone, which never all come.
		for start := time.Now(); got.Load()+int64(srv.Stats().Unsent+srv.Stats().Unanswered) < int64(sent) && time.Since(start) < 60*time.Second; {
			time.Sleep(50 * time.Millisecond)
		}
		if duringErr != nil {
			t.Fatalf("the other client's reads during the flood: %v", duringErr)
		}
		st := srv.Stats()
		name := map[bool]string{true: "paced flood", false: "unpaced flood"}[paced]
		b50, bmax := latencies(base)
		d50, dmax := latencies(during)
		t.Logf("%s: %d read requests in %v (%.0f/s); answers: %d backlog full, %d in all; server: %d reads served, %d refused as busy",
			name, sent-first, floodTook.Round(time.Millisecond), float64(sent-first)/floodTook.Seconds(), busy.Load()-busy0, got.Load()-got0,
			st.Reads-st0.Reads, st.Busy-st0.Busy)
		t.Logf("%s: other client: %d reads in 2 s before any flood (median %v, max %v), %d reads during the flood (median %v, max %v, %.1f reads/s)",
			name, len(base), b50, bmax, len(during), d50, dmax, float64(len(during))/floodTook.Seconds())
		// The receive loop never waits to send: a refusal the kernel
		// would not queue (the server's send buffer full) is counted as
		// unsent instead.
		if got.Load()+int64(st.Unsent+st.Unanswered) != int64(sent) || other.Load() != 0 {
			t.Errorf("%s: %d of %d flood requests answered, %d answers unsent, %d refusals not sent (%d unexpected replies)", name, got.Load(), sent, st.Unsent, st.Unanswered, other.Load())
		}
		// Unsent counts every reply the kernel refused, refusals and
		// transfer errors alike: each refusal was received or is among
		// them.
		if b := uint64(busy.Load()); busy.Load() == busy0 || b > st.Busy || st.Busy > b+st.Unsent+st.Unanswered {
			t.Errorf("%s: %d backlog-full replies received, server counted %d (%d unsent, %d refusals not sent)", name, busy.Load(), st.Busy, st.Unsent, st.Unanswered)
		}
		t.Logf("%s: %d answers unsent so far (server's send buffer full); %d transfers to the flooder not sent; the other client asked again after %d (before any flood: %d)",
			name, st.Unsent, notSentReplies.Load(), floodNotSent.Load(), baseNotSent.Load())
		if n := floodNotSent.Load(); n > 0 && n >= int64(len(during)) {
			t.Errorf("%s: the other client's transfers failed to send %d times against %d reads served: it was not kept served", name, n, len(during))
		}
		if paced && len(during) < 5 {
			t.Errorf("%s: the other client got only %d reads", name, len(during))
		}
	}
	close(sampling)
	<-sampled
	t.Logf("server: heap %d KiB before, at most %d KiB during the floods (+%d KiB); goroutines %d before, at most %d during",
		heap0>>10, heapMax>>10, (int64(heapMax)-int64(heap0))>>10, gor0, gorMax)
	t.Logf("server stats: %+v", srv.Stats())
	if heapMax > heap0+32<<20 || gorMax > gor0+8 {
		t.Errorf("server heap or goroutines grew: heap %d -> %d, goroutines %d -> %d", heap0, heapMax, gor0, gorMax)
	}
}

// blockserverDepth returns the deepest stack, in frames, of the
// goroutines running blockserver's server code.
func blockserverDepth(buf []byte) int {
	buf = buf[:runtime.Stack(buf, true)]
	deepest := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "blockserver.(*Server)") {
			continue
		}
		frames := strings.Count(g, "\n\t") // one file:line line per frame
		deepest = max(deepest, frames)
	}
	return deepest
}

// TestBlockServerFailingJobs: a client that does not read its socket is
// congested, so the server's RDMA WRITEs to it fail at once (ENOBUFS,
// barrier.NotSent) along with their error replies. 3000 queued requests
// all fail that way; the server's stacks stay shallow (sampled every
// 5 ms), every request is accounted for, and afterwards the client,
// drained, and another client are served normally.
func TestBlockServerFailingJobs(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const (
		port    = 4880
		bsize   = 4096
		nblocks = 16
		reqs    = 3000
	)
	server := netip.AddrPortFrom(vmtest.IBAddr2, port)
	srv, model := bsServer(t, ctx, port, nblocks, bsize, blockserver.ServerConfig{Slots: 2, Backlog: 4096, ClientBacklog: 4096})
	// A small receive buffer: the port is congested after about 64
	// queued messages. Its own requests wait out a congested server
	// (WaitCongested): the server's receive queue may fill too.
	p := newRawPeer(t, ctx, netip.AddrPortFrom(vmtest.IBAddr1, port+1), server, &rdssock.Config{ReceiveBuffer: 4096, SendBuffer: 1 << 20, WaitCongested: true}, bsize)

	stackBuf := make([]byte, 1<<20)
	depth0 := blockserverDepth(stackBuf)
	var depthMax atomic.Int64
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-sampling:
				return
			case <-time.After(5 * time.Millisecond):
				if d := int64(blockserverDepth(stackBuf)); d > depthMax.Load() {
					depthMax.Store(d)
				}
			}
		}
	}()
	start := time.Now()
	for i := range reqs {
		m := bsMsg{op: bsRead, id: uint32(i + 1), block: uint64(i % nblocks), cookie: uint64(p.cookie)}
		if _, err := p.sock.WriteMsgContext(ctx, m.bytes(), nil, server, 0); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	var st blockserver.ServerStats
	for {
		st = srv.Stats()
		if st.Reads+st.RDMAFailures+st.Busy >= reqs || time.Since(start) > 2*time.Minute {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	close(sampling)
	<-sampled
	t.Logf("%d requests from a congested client handled in %v: %d served, %d failed RDMA (not sent), %d backlog full; %d error replies, %d unsent",
		reqs, took.Round(time.Millisecond), st.Reads, st.RDMAFailures, st.Busy, st.Errors, st.Unsent)
	t.Logf("server goroutines' deepest stack: %d frames at rest, %d during the failures", depth0, depthMax.Load())
	if st.Reads+st.RDMAFailures+st.Busy != reqs {
		t.Fatalf("%d of %d requests accounted for", st.Reads+st.RDMAFailures+st.Busy, reqs)
	}
	if st.RDMAFailures < reqs/2 {
		t.Errorf("only %d transfers failed: the client was not congested", st.RDMAFailures)
	}
	if st.Errors+st.Unsent+st.Unanswered-st.Busy < st.RDMAFailures {
		t.Errorf("%d failed transfers but %d error replies attempted", st.RDMAFailures, st.Errors+st.Unsent+st.Unanswered-st.Busy)
	}
	if depthMax.Load() > 40 {
		t.Errorf("a server stack reached %d frames", depthMax.Load())
	}
	// Drain the congested client and count what reached it.
	buf, oob := make([]byte, 256), make([]byte, 64*cmsg.RDMAStatusSpace)
	kinds := map[uint8]int{}
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		n, _, _, from, err := p.sock.ReadMsgContext(rctx, buf, oob, 0)
		rcancel()
		if err != nil {
			break
		}
		if m, ok := parseBS(buf[:n]); ok && from == server {
			kinds[m.op]++
		}
	}
	t.Logf("the client drained %d read-done and %d error replies", kinds[bsReadDone], kinds[bsError])
	// Served again, this client and another.
	served := false
	for i := 0; i < 20 && !served; i++ {
		id := uint32(10000 + i)
		p.sock.WriteMsgContext(ctx, bsMsg{op: bsRead, id: id, block: 3, cookie: uint64(p.cookie)}.bytes(), nil, server, 0)
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		for {
			n, _, _, from, err := p.sock.ReadMsgContext(rctx, buf, oob, 0)
			if err != nil {
				break
			}
			if m, ok := parseBS(buf[:n]); ok && from == server && m.id == id {
				served = m.op == bsReadDone
				break
			}
		}
		rcancel()
	}
	if !served {
		t.Error("the drained client is not served again")
	}
	csock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr1, port+2), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := blockserver.Dial(ctx, csock, server, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stop := make(chan struct{})
	time.AfterFunc(time.Second, func() { close(stop) })
	var notSent atomic.Int64
	lat, err := readLoop(t, ctx, cl, model, stop, &notSent)
	if err != nil || len(lat) == 0 {
		t.Fatalf("another client after the failures: %d reads, %v", len(lat), err)
	}
	t.Logf("afterwards: the drained client served again, another client read %d blocks in 1 s", len(lat))
}

// TestBlockServerForgedReplies: while a client runs a random workload,
// two other sockets, one on the server's own address, send it forged
// replies of every kind (read done, write fetched, write done, error,
// held, release) with guessed IDs: sequential from 0 and random. The
// client ignores and counts every one, and its data stays exact.
func TestBlockServerForgedReplies(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const (
		port    = 4890
		bsize   = 4096
		nblocks = 16
	)
	server := netip.AddrPortFrom(vmtest.IBAddr2, port)
	_, model := bsServer(t, ctx, port, nblocks, bsize, blockserver.ServerConfig{})
	caddr := netip.AddrPortFrom(vmtest.IBAddr1, port+1)
	csock, err := rdssock.Listen(caddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := blockserver.Dial(ctx, csock, server, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var forgers []*rdssock.Conn
	for _, a := range []netip.AddrPort{netip.AddrPortFrom(vmtest.IBAddr2, port+2), netip.AddrPortFrom(vmtest.IBAddr1, port+3)} {
		s, err := rdssock.Listen(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		forgers = append(forgers, s)
	}
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for fi, s := range forgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(fi), 9))
			kinds := []bsMsg{
				{op: bsReadDone}, {op: bsWriteFetched}, {op: bsWriteDone},
				{op: bsError, status: 2}, {op: bsError, status: 9, aux: 6}, {op: bsRelease}, {op: bsPong},
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// About 1,000 forgeries per second from each: enough to
				// reach every window, too few to congest the client's
				// port (a congested client hears nothing, not even its
				// server).
				time.Sleep(time.Millisecond)
				m := kinds[i%len(kinds)]
				m.id = uint32(i / 2)
				if i%2 == 1 {
					m.id = r.Uint32()
				}
				m.block, m.buf, m.crc = r.Uint64N(nblocks), r.Uint32N(8), r.Uint32()
				if _, err := s.WriteMsgContext(ctx, m.bytes(), nil, caddr, 0); err != nil {
					if errors.Is(err, rdssock.ErrCongested) {
						time.Sleep(time.Millisecond)
						continue
					}
					t.Errorf("forge: %v", err)
					return
				}
				sent.Add(1)
			}
		}()
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	res, err := blockserver.Workload(wctx, cl, model, 300, 2, 7)
	wcancel()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("workload under forged replies: %v", err)
	}
	for start := time.Now(); cl.Stats().Foreign < uint64(sent.Load()) && time.Since(start) < 20*time.Second; {
		time.Sleep(20 * time.Millisecond)
	}
	sum, err := cl.Sum(ctx)
	if err != nil || sum != res.Sum {
		t.Fatalf("server's SHA-256 %x (%v), the model's %x", sum, err, res.Sum)
	}
	st, ps := cl.Stats(), cl.Pool().Stats()
	t.Logf("%d forged replies from 2 addresses during %d reads and %d writes (%v): client counted %d foreign, %d stray; pool %+v",
		sent.Load(), res.Reads, res.Writes, res.Duration.Round(time.Millisecond), st.Foreign, st.Stray, ps)
	if st.Foreign != uint64(sent.Load()) || st.Stray != 0 {
		t.Errorf("client stats %+v, want %d foreign and no stray", st, sent.Load())
	}
	if ps.Quarantined != 0 || ps.Lent != ps.Returned {
		t.Errorf("pool %+v: a forged reply touched a buffer", ps)
	}
}
