//go:build linux

package blockserver

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// A Client reads and writes blocks of a Server's file. Its buffers come
// from a pool registered once: data lands in them by RDMA and is consumed
// in place. Methods are safe for concurrent use; each call holds one pool
// buffer.
//
// The client accepts replies only from the server's address, and only
// for a request it has outstanding: request IDs are random, so a host that
// can reach the client's port cannot complete a call, confirm a write or
// release a buffer by guessing. Ignored messages are counted in Stats.
type Client struct {
	sock      *rdssock.Conn
	c         *rdmaops.Conn
	server    netip.AddrPort
	pool      *rdmaops.Pool
	blockSize int
	nblocks   uint64

	mu    sync.Mutex
	ids   *rand.ChaCha8 // request IDs
	calls map[uint32]*call

	foreign, stray atomic.Uint64
	confirms       sync.WaitGroup // Buffer.Confirm calls started by the reader
	done           chan struct{}
}

// call is a request in flight, or one whose buffer the server may still
// use after the caller gave up (abandoned) or after an errHeld reply
// (held): it stays in Client.calls until the server's late answer or
// release message frees the buffer.
type call struct {
	ch    chan msg
	buf   *rdmaops.Buffer // the pool buffer the server may still use; nil once the server is done with it
	state callState
}

type callState uint8

const (
	callActive    callState = iota // the caller waits; it owns buf once a reply says the server is done with it
	callAbandoned                  // the caller gave up: buf is revoked until the server answers at all
	callHeld                       // the server said errHeld: buf is revoked until its release message
)

// ClientStats count the messages a Client ignored.
type ClientStats struct {
	Foreign uint64 // from an address other than the server's
	Stray   uint64 // from the server, for no request outstanding or held (late, repeated or forged)
}

// Stats returns the client's counters.
func (cl *Client) Stats() ClientStats {
	return ClientStats{Foreign: cl.foreign.Load(), Stray: cl.stray.Load()}
}

// ClientConfig configures a Client.
type ClientConfig struct {
	Buffers int // pool buffers, the most calls in flight (default 8)
}

// Dial waits until the server at server answers (retrying while it is not
// up yet, until ctx is done), learns its block size and count, and
// registers the client's buffer pool. It starts a goroutine reading sock;
// Close stops it. A socket with rdssock.Config.WaitCongested makes
// requests wait while a busy server's port is congested instead of
// failing with rdssock.ErrCongested.
func Dial(ctx context.Context, sock *rdssock.Conn, server netip.AddrPort, cfg *ClientConfig) (*Client, error) {
	var cc ClientConfig
	if cfg != nil {
		cc = *cfg
	}
	if cc.Buffers <= 0 {
		cc.Buffers = 8
	}
	cl := newClient(sock, server)
	cl.c = rdmaops.New(sock, nil, nil)
	go cl.loop()
	pong, err := cl.ping(ctx)
	if err != nil {
		cl.stop()
		return nil, err
	}
	cl.nblocks, cl.blockSize = pong.Block, int(pong.Buf)
	if cc.Buffers > MaxBuffers {
		cl.stop()
		return nil, fmt.Errorf("blockserver: %d buffers: a server accepts at most %d per client", cc.Buffers, MaxBuffers)
	}
	ann := &announcer{c: cl.c, to: cl.server, stride: pageRound(cl.blockSize), mrs: make(map[cmsg.Cookie]*rdmaops.MR)}
	cl.pool, err = rdmaops.NewPool(ctx, ann, cc.Buffers, cl.blockSize, cmsg.FlagReadWrite)
	if err != nil {
		cl.stop()
		return nil, err
	}
	return cl, nil
}

// newClient sets up a client's state but no transport.
func newClient(sock *rdssock.Conn, server netip.AddrPort) *Client {
	var seed [32]byte
	crand.Read(seed[:])
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	return &Client{sock: sock, server: server, ids: rand.NewChaCha8(seed), calls: make(map[uint32]*call), done: make(chan struct{})}
}

func (cl *Client) ping(ctx context.Context) (msg, error) {
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		m, err := cl.call(pctx, &msg{Op: opPing})
		cancel()
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return msg{}, fmt.Errorf("blockserver: no answer from %v: %w", cl.server, ctx.Err())
		}
	}
}

// Blocks returns the number of blocks, BlockSize their size.
func (cl *Client) Blocks() uint64 { return cl.nblocks }
func (cl *Client) BlockSize() int { return cl.blockSize }

// Pool returns the client's buffer pool (for its statistics).
func (cl *Client) Pool() *rdmaops.Pool { return cl.pool }

// Conn returns the client's RDMA connection (for its counters).
func (cl *Client) Conn() *rdmaops.Conn { return cl.c }

func (cl *Client) loop() {
	defer close(cl.done)
	buf := make([]byte, 4096)
	for {
		m, err := cl.c.ReadMsg(context.Background(), buf, nil)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if m.N == 0 {
			continue // a registration's announcement echoed, a ping reply
		}
		cl.receive(buf[:m.N], m.From)
	}
}

// receive handles one message: from the server, a reply to a request
// outstanding or held; anything else is counted and dropped.
func (cl *Client) receive(b []byte, from netip.AddrPort) {
	if netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) != cl.server {
		cl.foreign.Add(1)
		return
	}
	var m msg
	if m.decode(b) != nil {
		cl.stray.Add(1)
		return
	}
	held := m.Op == opError && m.Status == errHeld
	var confirm *rdmaops.Buffer
	cl.mu.Lock()
	c := cl.calls[m.ID]
	switch {
	case c == nil:
		cl.mu.Unlock()
		cl.stray.Add(1)
		return
	case c.state == callActive && m.Op == opRelease:
		cl.stray.Add(1) // nothing held: a release answers an errHeld reply only
	case c.state == callActive:
		if held && c.buf != nil {
			// The server's kernel may still write into or read the
			// buffer: revoke its key and keep it out of circulation
			// until the release message.
			_ = c.buf.Revoke()
			c.state = callHeld
		} else if !held {
			c.buf = nil // the server is done with the buffer: the caller owns it
		}
		select {
		case c.ch <- m:
		default: // a reply nobody waits for
		}
	case c.state == callAbandoned && held:
		c.state = callHeld // the late answer says: still held
	case c.state == callAbandoned, m.Op == opRelease:
		// Any answer to an abandoned call, or the release after errHeld:
		// the server is done with the buffer's old cookie.
		confirm = c.buf
		delete(cl.calls, m.ID)
	default:
		cl.stray.Add(1) // held calls wait for their release only
	}
	cl.mu.Unlock()
	if confirm != nil {
		// Registering anew sends a message, so it does not run on the
		// reading goroutine; Close waits for it. If it fails, the buffer
		// stays quarantined, which is safe.
		cl.confirms.Add(1)
		go func() {
			defer cl.confirms.Done()
			_ = confirm.Confirm()
		}()
	}
}

// begin registers a call holding buffer b (nil: none) under a fresh
// random ID and returns it; a call gets up to two replies (a write's
// "fetched" and "done").
func (cl *Client) begin(m *msg, b *rdmaops.Buffer) *call {
	c := &call{ch: make(chan msg, 2), buf: b}
	cl.mu.Lock()
	for {
		m.ID = uint32(cl.ids.Uint64())
		if m.ID != 0 && cl.calls[m.ID] == nil {
			break
		}
	}
	cl.calls[m.ID] = c
	cl.mu.Unlock()
	return c
}

// end forgets a call that finished, unless the server may still use its
// buffer.
func (cl *Client) end(id uint32) {
	cl.mu.Lock()
	if c := cl.calls[id]; c != nil && c.state == callActive {
		delete(cl.calls, id)
	}
	cl.mu.Unlock()
}

// settle decides the fate of buffer b after its call ended with err (r is
// the reply, if any): back to the pool as it is when the server refused
// the request or the request never left, with a new key when the server
// answered that the transfer failed, and otherwise revoked and held until
// the server's late answer (the server may still transfer into or out of
// it, and the kernel honours a freed key for a while).
func (cl *Client) settle(id uint32, b *rdmaops.Buffer, r msg, err error, sent bool) {
	cl.mu.Lock()
	c := cl.calls[id]
	switch {
	case c == nil || c.state != callActive:
		cl.mu.Unlock() // held: the reader revoked it; it waits for the release
		return
	case c.buf != nil && sent && !errors.Is(err, ErrServer):
		_ = b.Revoke() // quarantined even if the free failed
		c.state = callAbandoned
		cl.mu.Unlock()
		return
	}
	delete(cl.calls, id)
	cl.mu.Unlock()
	if !sent || refused(r, err) {
		b.Release()
		return
	}
	b.Fail()
}

func (cl *Client) send(ctx context.Context, m *msg) error {
	var b [headerLen]byte
	_, err := cl.sock.WriteMsgContext(ctx, m.encode(b[:]), nil, cl.server, 0)
	return err
}

func (cl *Client) call(ctx context.Context, m *msg) (msg, error) {
	c := cl.begin(m, nil)
	defer cl.end(m.ID)
	if err := cl.send(ctx, m); err != nil {
		return msg{}, err
	}
	return wait(ctx, c.ch)
}

func wait(ctx context.Context, ch chan msg) (msg, error) {
	select {
	case r := <-ch:
		if r.Op == opError {
			why := statusText(r.Status)
			if a := auxText(r.Status, r.Aux); a != "" {
				why += ": " + a
			}
			return r, fmt.Errorf("%w: block %d: %s", ErrServer, r.Block, why)
		}
		return r, nil
	case <-ctx.Done():
		return msg{}, ctx.Err()
	}
}

// refused reports whether a call failed because the server refused the
// request before any RDMA against the client's buffer: the buffer can go
// back to the pool as it is.
func refused(r msg, err error) bool {
	return errors.Is(err, ErrServer) && r.Op == opError && r.Status != errTransfer && r.Status != errHeld
}

// ReadBlock reads block n: the server writes it straight into a pool
// buffer, and fn consumes it there (data is valid only during fn). The
// immediate data arrives only after the block is in place; its CRC is
// checked before fn runs.
func (cl *Client) ReadBlock(ctx context.Context, n uint64, fn func(data []byte) error) error {
	b, err := cl.pool.Get(ctx)
	if err != nil {
		return err
	}
	req := msg{Op: opRead, Block: n, Buf: uint32(b.Index()), Cookie: uint64(b.Cookie())}
	c := cl.begin(&req, b)
	defer cl.end(req.ID)
	if err := cl.send(ctx, &req); err != nil {
		cl.settle(req.ID, b, msg{}, err, false)
		return err
	}
	r, err := wait(ctx, c.ch)
	if err != nil {
		cl.settle(req.ID, b, r, err, true)
		return err
	}
	if r.Op != opReadDone || r.Buf != uint32(b.Index()) || r.Block != n {
		b.Fail()
		return fmt.Errorf("blockserver: read of block %d answered by %+v", n, r)
	}
	if err := b.Landed(); err != nil {
		return err
	}
	defer b.Release()
	if crc32.ChecksumIEEE(b.Bytes()) != r.CRC {
		return fmt.Errorf("blockserver: block %d arrived with a wrong CRC", n)
	}
	return fn(b.Bytes())
}

// WriteBlock writes block n: fill writes the data into a pool buffer, the
// server RDMA-reads it, and WriteBlock returns once the server confirms
// that the block is on stable storage.
func (cl *Client) WriteBlock(ctx context.Context, n uint64, fill func(buf []byte)) error {
	b, err := cl.pool.Get(ctx)
	if err != nil {
		return err
	}
	fill(b.Bytes())
	req := msg{Op: opWrite, Block: n, Buf: uint32(b.Index()), Cookie: uint64(b.Cookie()), CRC: crc32.ChecksumIEEE(b.Bytes())}
	c := cl.begin(&req, b)
	defer cl.end(req.ID)
	if err := cl.send(ctx, &req); err != nil {
		cl.settle(req.ID, b, msg{}, err, false)
		return err
	}
	r, err := wait(ctx, c.ch)
	if err != nil {
		cl.settle(req.ID, b, r, err, true)
		return err
	}
	if r.Op != opWriteFetched || r.Buf != uint32(b.Index()) || r.Block != n {
		b.Fail()
		return fmt.Errorf("blockserver: write of block %d answered by %+v", n, r)
	}
	// The immediate data of the server's READ: the buffer is free again.
	if err := b.Release(); err != nil {
		return err
	}
	r, err = wait(ctx, c.ch)
	if err != nil {
		return err
	}
	if r.Op != opWriteDone || r.CRC != req.CRC || r.Block != n {
		return fmt.Errorf("blockserver: write of block %d confirmed by %+v", n, r)
	}
	return nil
}

// Sum returns the server's SHA-256 of the whole file, computed after every
// write it has confirmed.
func (cl *Client) Sum(ctx context.Context) ([32]byte, error) {
	r, err := cl.call(ctx, &msg{Op: opSum})
	return r.Sum, err
}

// Bye tells the server to stop serving, passing the client's own SHA-256
// of the file for the server to check.
func (cl *Client) Bye(ctx context.Context, sum [32]byte) error {
	return cl.send(ctx, &msg{Op: opBye, Sum: sum})
}

func (cl *Client) stop() {
	cl.sock.Close()
	<-cl.done
	cl.confirms.Wait()
}

// Close closes the socket, waits for the client's goroutines, and frees
// the pool.
func (cl *Client) Close() error {
	cl.stop() // closing the socket drops its keys, so the pool's frees may fail
	if cl.pool != nil {
		cl.pool.Close()
	}
	return nil
}

// announcer registers the client's pool buffers: each registration is
// sent to the server as an opAnnounce naming the buffer's index, with the
// cookie as RDS_CMSG_RDMA_DEST, so the server accepts requests for that
// buffer with that cookie only (a buffer registered again after a failure
// makes its old cookie stale).
type announcer struct {
	c      *rdmaops.Conn
	to     netip.AddrPort
	stride int
	mu     sync.Mutex
	mrs    map[cmsg.Cookie]*rdmaops.MR
}

func (a *announcer) Register(ctx context.Context, s rdmaops.Span, flags cmsg.Flags) (cmsg.Cookie, error) {
	var b [headerLen]byte
	m := msg{Op: opAnnounce, Buf: uint32(s.Offset() / a.stride)}
	mr, err := a.c.Register(ctx, s, flags, a.to, m.encode(b[:]))
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	a.mrs[mr.Cookie()] = mr
	a.mu.Unlock()
	return mr.Cookie(), nil
}

func (a *announcer) Deregister(ck cmsg.Cookie, flags cmsg.Flags) error {
	a.mu.Lock()
	mr := a.mrs[ck]
	delete(a.mrs, ck)
	a.mu.Unlock()
	if mr == nil {
		return rdmaops.ErrFreed
	}
	return mr.FreeFlags(flags)
}

// pageRound rounds n up to whole pages, as rdmaops.NewPool lays out its
// buffers.
func pageRound(n int) int {
	ps := os.Getpagesize()
	return (n + ps - 1) &^ (ps - 1)
}
