//go:build linux

package blockserver

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
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
type Client struct {
	sock      *rdssock.Conn
	c         *rdmaops.Conn
	server    netip.AddrPort
	pool      *rdmaops.Pool
	blockSize int
	nblocks   uint64

	nextID atomic.Uint32
	mu     sync.Mutex
	calls  map[uint32]chan msg
	// held maps the ID of a call that ended without the server's answer
	// to its buffer, revoked and quarantined until the answer comes.
	held map[uint32]*rdmaops.Buffer
	done chan struct{}
}

// ClientConfig configures a Client.
type ClientConfig struct {
	Buffers int // pool buffers, the most calls in flight (default 8)
}

// Dial waits until the server at server answers (retrying while it is not
// up yet, until ctx is done), learns its block size and count, and
// registers the client's buffer pool. It starts a goroutine reading sock;
// Close stops it.
func Dial(ctx context.Context, sock *rdssock.Conn, server netip.AddrPort, cfg *ClientConfig) (*Client, error) {
	var cc ClientConfig
	if cfg != nil {
		cc = *cfg
	}
	if cc.Buffers <= 0 {
		cc.Buffers = 8
	}
	cl := &Client{sock: sock, c: rdmaops.New(sock, nil, nil), server: server, calls: make(map[uint32]chan msg), held: make(map[uint32]*rdmaops.Buffer), done: make(chan struct{})}
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
	ann := &announcer{c: cl.c, to: server, stride: pageRound(cl.blockSize), mrs: make(map[cmsg.Cookie]*rdmaops.MR)}
	cl.pool, err = rdmaops.NewPool(ctx, ann, cc.Buffers, cl.blockSize, cmsg.FlagReadWrite)
	if err != nil {
		cl.stop()
		return nil, err
	}
	return cl, nil
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
	buf, oob := make([]byte, 4096), make([]byte, cmsg.MaxReceiveSpace+8*cmsg.RDMAStatusSpace)
	for {
		n, oobn, _, _, err := cl.sock.ReadMsg(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		cl.c.HandleControl(oob[:oobn])
		var m msg
		if n == 0 || m.decode(buf[:n]) != nil {
			continue
		}
		cl.mu.Lock()
		ch := cl.calls[m.ID]
		b := cl.held[m.ID]
		delete(cl.held, m.ID)
		cl.mu.Unlock()
		if b != nil {
			// The late answer to an abandoned call: the server is done
			// with the buffer's old cookie. Registering anew sends a
			// message, so it does not run on the reading goroutine; if it
			// fails the buffer stays out of circulation, which is safe.
			go func() { _ = b.Confirm() }()
		}
		if ch != nil {
			select {
			case ch <- m:
			default: // a reply nobody waits for any more
			}
		}
	}
}

// begin registers a call and returns its reply channel; a call gets up to
// two replies (a write's "fetched" and "done").
func (cl *Client) begin(m *msg) chan msg {
	m.ID = cl.nextID.Add(1)
	ch := make(chan msg, 2)
	cl.mu.Lock()
	cl.calls[m.ID] = ch
	cl.mu.Unlock()
	return ch
}

// abandon handles a buffer whose call ended without a definite answer
// (timeout, canceled context, send error): the server may still transfer
// into or out of it, and the kernel honours a freed key for a while, so
// the buffer is revoked and quarantined until the server's late answer to
// call id arrives. If the server answered (an error reply or a malformed
// one), it is done with the buffer, which gets a new key at once.
func (cl *Client) abandon(id uint32, b *rdmaops.Buffer, err error) {
	if errors.Is(err, ErrServer) {
		b.Fail()
		return
	}
	_ = b.Revoke() // quarantined even if the free failed
	cl.mu.Lock()
	cl.held[id] = b
	cl.mu.Unlock()
}

func (cl *Client) end(id uint32) {
	cl.mu.Lock()
	delete(cl.calls, id)
	cl.mu.Unlock()
}

func (cl *Client) send(ctx context.Context, m *msg) error {
	var b [headerLen]byte
	_, err := cl.sock.WriteMsgContext(ctx, m.encode(b[:]), nil, cl.server)
	return err
}

func (cl *Client) call(ctx context.Context, m *msg) (msg, error) {
	ch := cl.begin(m)
	defer cl.end(m.ID)
	if err := cl.send(ctx, m); err != nil {
		return msg{}, err
	}
	return wait(ctx, ch)
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
	return errors.Is(err, ErrServer) && r.Op == opError && r.Status != errTransfer
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
	r, err := cl.call(ctx, &req)
	if err != nil {
		if refused(r, err) {
			b.Release() // the server never touched the buffer
		} else {
			cl.abandon(req.ID, b, err)
		}
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
	ch := cl.begin(&req)
	defer cl.end(req.ID)
	if err := cl.send(ctx, &req); err != nil {
		b.Release()
		return err
	}
	r, err := wait(ctx, ch)
	if err != nil {
		if refused(r, err) {
			b.Release()
		} else {
			cl.abandon(req.ID, b, err)
		}
		return err
	}
	if r.Op != opWriteFetched {
		b.Fail()
		return fmt.Errorf("blockserver: write of block %d answered by %+v", n, r)
	}
	// The immediate data of the server's READ: the buffer is free again.
	if err := b.Release(); err != nil {
		return err
	}
	r, err = wait(ctx, ch)
	if err != nil {
		return err
	}
	if r.Op != opWriteDone || r.CRC != req.CRC {
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
}

// Close frees the pool and closes the socket.
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
