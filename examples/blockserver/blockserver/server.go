//go:build linux

package blockserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// ServerStats count what a Server did.
type ServerStats struct {
	Reads, Writes, Errors, Syncs uint64 // Errors: error replies sent, for any reason
	RDMAFailures                 uint64

	// Messages refused, by reason; each was answered with an error
	// reply (see the package documentation).
	Short, Long, Empty uint64 // malformed: under 64 bytes, over 64 bytes, no bytes
	UnknownOps         uint64 // opcodes that are not requests
	BadBlocks          uint64 // block numbers out of range
	BadCookies         uint64 // cookies not announced for the buffer named (unknown, bogus, stale)
	NoCookie           uint64 // announcements without a cookie
	OverLimit          uint64 // announcements beyond MaxClients or MaxBuffers
	Busy               uint64 // requests refused because a backlog or the checksum queue was full
	Dropped            uint64 // refused without a reply: server-to-client kinds (counted in UnknownOps too)
	Unanswered         uint64 // refused without a reply: the client's refusals for the second were spent (counted above too)

	Announcements uint64 // buffer registrations announced by clients

	// Transfers that passed their deadline (counted at the deadline, and
	// in RDMAFailures once answered), held slots freed by the kernel's
	// late status, release messages sent (none when the late status came
	// before the answer, which then says the transfer failed), and
	// replies the kernel would not queue (a congested client, a full send
	// buffer, a closed socket).
	TimedOut, LateFreed, Releases, Unsent uint64
}

// A Server exports a file as numbered blocks of BlockSize bytes over RDS
// RDMA. A read request carries the client's cookie: the server reads the
// block into one of its own buffers and RDMA-writes it into the client's
// memory with immediate data "block N is in your buffer". A write request
// too: the server RDMA-reads the client's buffer, the immediate data of
// that READ tells the client its buffer is free, and once the block is
// written and fsynced a separate message confirms it.
type Server struct {
	sock      *rdssock.Conn // nil in unit tests
	c         rdmaConn
	send      func(ctx context.Context, b []byte, to netip.AddrPort, wait bool) error
	f         *os.File
	blockSize int
	nblocks   uint64
	region    *rdmaops.Region
	timeout   time.Duration
	maxQueue  int // Backlog
	maxClient int // ClientBacklog

	cookies cookieTable // touched by Serve's goroutine only

	mu        sync.Mutex
	slots     []srvSlot
	free      []int // free slots
	events    ring[int]
	backlog   ring[job]
	queued    map[netip.AddrPort]int // backlog entries per client
	inflight  map[netip.AddrPort]int // slots held per client
	sums      ring[job]
	sumsFrom  map[netip.AddrPort]int // checksum requests queued per client
	stats     ServerStats
	refusals  refusalBudget // under mu
	running   bool
	closed    bool
	held      atomic.Int32 // slots whose transfer timed out and whose memory the kernel may still use (for tests)
	kick      chan struct{}
	sumKick   chan struct{}
	writes    chan int // slots whose RDMA READ completed, for the writer
	quit      chan struct{}
	workers   sync.WaitGroup
	testDepth func() // unit tests: called where the dispatcher starts a job
}

// rdmaConn is what the server needs of an *rdmaops.Conn.
type rdmaConn interface {
	Do(ctx context.Context, to netip.AddrPort, op *rdmaops.Op) (barrier.Token, error)
	HandleControl(oob []byte) (dest cmsg.Cookie, hasDest bool, notices int, err error)
	Tracker() *barrier.Tracker
	Close() error
}

// job is a request waiting for, or holding, a slot.
type job struct {
	req  msg
	from netip.AddrPort
}

// srvSlot is one local buffer and the transfer using it. A slot is free
// again only when its transfer was answered (handled), the writer is done
// with it, and its memory is free (freed): the kernel's final status
// arrived, or the socket was closed. A transfer that timed out is
// answered at its deadline, but its slot stays held until then.
type srvSlot struct {
	idx      int
	j        job
	tok      barrier.Token
	status   barrier.Status
	busy     bool // holds a job
	reported bool // the tracker reported the transfer's status
	handled  bool // the dispatcher answered that status
	freed    bool // the kernel no longer touches the slot's memory
	wasHeld  bool // timed out before its memory was free: counted in held
	heldMsg  bool // an errHeld reply went out: a release is owed
	writing  bool // with the writer
	queued   bool // in the events ring
}

// ring is a fixed-capacity FIFO.
type ring[T any] struct {
	buf     []T
	head, n int
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, n)} }

func (r *ring[T]) push(v T) bool {
	if r.n == len(r.buf) {
		return false
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
	return true
}

// at returns the k-th oldest entry.
func (r *ring[T]) at(k int) *T { return &r.buf[(r.head+k)%len(r.buf)] }

// take removes and returns the k-th oldest entry (k < n), keeping the
// order of the others.
func (r *ring[T]) take(k int) T {
	v := *r.at(k)
	for ; k > 0; k-- {
		*r.at(k) = *r.at(k - 1)
	}
	var zero T
	*r.at(0) = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

func (r *ring[T]) pop() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v, true
}

// sumQueue is the most checksum requests queued at once; each client may
// have one.
const sumQueue = 4

// ServerConfig configures a Server.
type ServerConfig struct {
	BlockSize int           // bytes per block (default 8 KiB; at most 1 MiB)
	Slots     int           // local buffers, the most transfers in flight (default 8)
	Timeout   time.Duration // deadline of each RDMA operation (default 30s)

	// Backlog bounds the read and write requests waiting for a slot, from
	// all clients together (default 8 × Slots), and ClientBacklog those
	// from one client address (default Slots). A request beyond either
	// is refused with an error reply (status 8, aux 4 or 3).
	Backlog, ClientBacklog int
}

// NewServer returns a server for f on sock, which must be bound to an
// address of an RDMA device. The file's size must be a multiple of the
// block size. Give it a socket without rdssock.Config.WaitCongested: a
// send to a congested client must fail rather than stall the server.
func NewServer(sock *rdssock.Conn, f *os.File, cfg *ServerConfig) (*Server, error) {
	s, err := newServer(f, cfg)
	if err != nil {
		return nil, err
	}
	s.sock = sock
	// FailFast: the dispatcher issues every transfer; a client that keeps
	// its port congested gets a not-sent error instead of stalling it.
	s.c = rdmaops.New(sock, barrier.New(&barrier.Config{OnComplete: s.completed, OnRelease: s.released}), &rdmaops.Options{FailFast: true})
	s.send = func(ctx context.Context, b []byte, to netip.AddrPort, wait bool) error {
		flags := 0
		if !wait {
			flags = unix.MSG_DONTWAIT
		}
		_, err := sock.WriteMsgContext(ctx, b, nil, to, flags)
		return err
	}
	return s, nil
}

// newServer builds everything but the transport (c, send, sock).
func newServer(f *os.File, cfg *ServerConfig) (*Server, error) {
	var c ServerConfig
	if cfg != nil {
		c = *cfg
	}
	if c.BlockSize <= 0 {
		c.BlockSize = 8 << 10
	}
	if c.Slots <= 0 {
		c.Slots = 8
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Backlog <= 0 {
		c.Backlog = 8 * c.Slots
	}
	if c.ClientBacklog <= 0 {
		c.ClientBacklog = c.Slots
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size()%int64(c.BlockSize) != 0 {
		return nil, fmt.Errorf("blockserver: file size %d is not a multiple of the block size %d", fi.Size(), c.BlockSize)
	}
	region, err := rdmaops.NewRegion(c.Slots * c.BlockSize)
	if err != nil {
		return nil, err
	}
	s := &Server{
		f: f, blockSize: c.BlockSize, nblocks: uint64(fi.Size()) / uint64(c.BlockSize),
		region: region, timeout: c.Timeout, maxQueue: c.Backlog, maxClient: c.ClientBacklog,
		slots: make([]srvSlot, c.Slots), events: newRing[int](c.Slots),
		backlog: newRing[job](c.Backlog), queued: make(map[netip.AddrPort]int), inflight: make(map[netip.AddrPort]int),
		sums: newRing[job](sumQueue), sumsFrom: make(map[netip.AddrPort]int),
		kick: make(chan struct{}, 1), sumKick: make(chan struct{}, 1),
		writes: make(chan int, c.Slots),
	}
	for i := range s.slots {
		s.slots[i].idx = i
		s.free = append(s.free, c.Slots-1-i)
	}
	return s, nil
}

// Blocks returns the number of blocks in the file.
func (s *Server) Blocks() uint64 { return s.nblocks }

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Tracker returns the tracker of the server's RDMA operations.
func (s *Server) Tracker() *barrier.Tracker { return s.c.Tracker() }

// Serve answers requests until a client says goodbye (then it returns the
// client's view of the file's SHA-256, for checking) or ctx is done.
// Transfers still in flight when it returns complete later; Close ends
// them.
func (s *Server) Serve(ctx context.Context) (clientSum [32]byte, err error) {
	wctx, stop, err := s.startWorkers(ctx)
	if err != nil {
		return clientSum, err
	}
	defer stop()
	buf, oob := make([]byte, 4096), make([]byte, 32*cmsg.RDMAStatusSpace)
	for {
		n, oobn, _, from, rerr := s.sock.ReadMsgContext(ctx, buf, oob, 0)
		truncated := false
		if rerr != nil {
			if !errors.Is(rerr, rdssock.ErrTruncated) {
				if ctx.Err() != nil || errors.Is(rerr, net.ErrClosed) {
					return clientSum, ctx.Err()
				}
				return clientSum, rerr
			}
			truncated = true // answered below as too long
		}
		dest, hasDest, notices, err := s.c.HandleControl(oob[:oobn])
		if err != nil {
			return clientSum, err
		}
		if !from.IsValid() || (n == 0 && !truncated && !hasDest && (notices > 0 || oobn > 0)) {
			continue // completion notices or congestion updates, not a message
		}
		if sum, bye := s.handle(wctx, buf[:n], truncated, from, dest, hasDest); bye {
			return sum, nil
		}
	}
}

// startWorkers starts the dispatcher, the writer and the checksummer; stop
// ends them (the writer first finishes the writes already fetched).
func (s *Server) startWorkers(ctx context.Context) (wctx context.Context, stop func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, net.ErrClosed
	}
	if s.running {
		return nil, nil, errors.New("blockserver: Serve is already running")
	}
	s.running = true
	wctx, cancel := context.WithCancel(ctx)
	s.quit = make(chan struct{})
	s.workers.Add(3)
	go s.dispatcher(wctx)
	go s.writer(wctx)
	go s.summer(wctx)
	return wctx, func() {
		cancel()
		close(s.quit)
		s.workers.Wait()
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}, nil
}

// handle serves one message; bye reports a goodbye and its checksum.
func (s *Server) handle(ctx context.Context, b []byte, truncated bool, from netip.AddrPort, dest cmsg.Cookie, hasDest bool) (sum [32]byte, bye bool) {
	m, status, aux := parseRequest(b, truncated, s.nblocks)
	if status == 0 && (m.Op == opRead || m.Op == opWrite) && !s.cookies.valid(from, m.Buf, m.Cookie) {
		status = errBadCookie
	}
	if status != 0 {
		s.refuse(ctx, from, &m, status, aux)
		return sum, false
	}
	switch m.Op {
	case opAnnounce:
		if !hasDest {
			s.refuse(ctx, from, &m, errMalformed, malNoCookie)
			return sum, false
		}
		if lim := s.cookies.announce(from, m.Buf, uint64(dest)); lim != 0 {
			s.refuse(ctx, from, &m, errLimit, lim)
			return sum, false
		}
		s.mu.Lock()
		s.stats.Announcements++
		s.mu.Unlock()
	case opPing:
		s.reply(ctx, from, &msg{Op: opPong, ID: m.ID, Block: s.nblocks, Buf: uint32(s.blockSize)}, false)
	case opRead, opWrite:
		if lim := s.enqueue(job{req: m, from: from}); lim != 0 {
			s.refuse(ctx, from, &m, errLimit, lim)
		}
	case opSum:
		if lim := s.enqueueSum(job{req: m, from: from}); lim != 0 {
			s.refuse(ctx, from, &m, errLimit, lim)
		}
	case opBye:
		return m.Sum, true
	}
	return sum, false
}

// reply sends m to a client. Only the workers wait for room in the send
// buffer; the receive loop never does. A reply the kernel refuses is
// counted in Unsent.
func (s *Server) reply(ctx context.Context, to netip.AddrPort, m *msg, wait bool) {
	var b [headerLen]byte
	if err := s.send(ctx, m.encode(b[:]), to, wait); err != nil {
		s.mu.Lock()
		s.stats.Unsent++
		s.mu.Unlock()
	}
}

// refuse answers a message the server will not serve and counts why.
func (s *Server) refuse(ctx context.Context, to netip.AddrPort, m *msg, status uint8, aux uint16) {
	s.mu.Lock()
	st := &s.stats
	switch {
	case status == errMalformed && aux == malShort:
		st.Short++
	case status == errMalformed && aux == malLong:
		st.Long++
	case status == errMalformed && aux == malEmpty:
		st.Empty++
	case status == errMalformed && aux == malNoCookie:
		st.NoCookie++
	case status == errUnknownOp:
		st.UnknownOps++
	case status == errBadBlock:
		st.BadBlocks++
	case status == errBadCookie:
		st.BadCookies++
	case status == errLimit && (aux == limClients || aux == limBuffers):
		st.OverLimit++
	case status == errLimit:
		st.Busy++
	}
	drop := status == errUnknownOp && isReplyKind(uint8(aux))
	switch {
	case drop:
		st.Dropped++
	case !s.refusals.allow(to, time.Now()):
		st.Unanswered++
		drop = true
	}
	s.mu.Unlock()
	if !drop {
		s.fail(ctx, to, m, status, aux, false)
	}
}

func (s *Server) fail(ctx context.Context, to netip.AddrPort, req *msg, status uint8, aux uint16, wait bool) {
	s.mu.Lock()
	s.stats.Errors++
	s.mu.Unlock()
	s.reply(ctx, to, &msg{Op: opError, ID: req.ID, Block: req.Block, Buf: req.Buf, Status: status, Aux: aux}, wait)
}

// enqueue queues a transfer for the dispatcher; it returns a lim* aux when
// a backlog is full.
func (s *Server) enqueue(j job) uint16 {
	s.mu.Lock()
	switch {
	case s.queued[j.from] >= s.maxClient:
		s.mu.Unlock()
		return limClient
	case !s.backlog.push(j):
		s.mu.Unlock()
		return limServer
	}
	s.queued[j.from]++
	s.mu.Unlock()
	s.wake(s.kick)
	return 0
}

func (s *Server) enqueueSum(j job) uint16 {
	s.mu.Lock()
	if s.sumsFrom[j.from] > 0 || !s.sums.push(j) {
		s.mu.Unlock()
		return limSums
	}
	s.sumsFrom[j.from]++
	s.mu.Unlock()
	s.wake(s.sumKick)
	return 0
}

func (s *Server) wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// dispatcher is the one goroutine that starts transfers and answers their
// completions, one step at a time: a transfer that fails at once only
// queues an event, which a later step handles, so a backlog of failing
// jobs is worked through in a loop, never by recursion.
func (s *Server) dispatcher(ctx context.Context) {
	defer s.workers.Done()
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			return
		}
		for s.step(ctx) {
		}
	}
}

// Actions a step performs after releasing the lock.
const (
	actReply   = 1 << iota // send the error reply in status/aux
	actRelease             // send a release message
	actWrite               // hand the slot to the writer
)

// step does one unit of the dispatcher's work and reports whether there
// was any.
func (s *Server) step(ctx context.Context) bool {
	s.mu.Lock()
	if i, ok := s.events.pop(); ok {
		sl := &s.slots[i]
		sl.queued = false
		j := sl.j
		act, status, aux := 0, uint8(0), uint16(0)
		if sl.reported && !sl.handled {
			sl.handled = true
			switch {
			case sl.status == barrier.Success && j.req.Op == opRead:
				s.stats.Reads++ // the immediate data of the WRITE was the answer
			case sl.status == barrier.Success:
				sl.writing = true
				act |= actWrite
			default:
				s.stats.RDMAFailures++
				act |= actReply
				status, aux = errTransfer, uint16(sl.status)
				if sl.status == barrier.TimedOut && !sl.freed {
					// The kernel may still move data into or out of
					// the client's buffer: tell the client to hold it.
					status = errHeld
					sl.heldMsg = true
				}
			}
		}
		if sl.handled && sl.freed && !sl.writing {
			if sl.heldMsg {
				act |= actRelease
				s.stats.Releases++
			}
			s.releaseSlotLocked(i)
		}
		s.mu.Unlock()
		if act&actReply != 0 {
			s.fail(ctx, j.from, &j.req, status, aux, true)
		}
		if act&actRelease != 0 {
			s.reply(ctx, j.from, &msg{Op: opRelease, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf}, true)
		}
		if act&actWrite != 0 {
			s.writes <- i // never blocks: one entry per slot at most
		}
		return true
	}
	if len(s.free) == 0 || s.backlog.n == 0 {
		s.mu.Unlock()
		return false
	}
	j := s.backlog.take(s.fairPickLocked())
	if s.queued[j.from]--; s.queued[j.from] <= 0 {
		delete(s.queued, j.from)
	}
	s.inflight[j.from]++
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.slots[i] = srvSlot{idx: i, j: j, busy: true}
	s.mu.Unlock()
	s.start(ctx, i, j)
	return true
}

// fairLook bounds how far into the backlog the dispatcher looks for the
// request of a client with fewer transfers in flight.
const fairLook = 64

// fairPickLocked returns the position in the backlog of the next request
// to start: the oldest one among those of the clients with the fewest
// transfers in flight, looking at the first fairLook entries, so that a
// client that floods cannot hold every slot while another waits.
func (s *Server) fairPickLocked() int {
	best, bestN := 0, -1
	for k := 0; k < s.backlog.n && k < fairLook; k++ {
		n := s.inflight[s.backlog.at(k).from]
		if bestN < 0 || n < bestN {
			best, bestN = k, n
		}
		if n == 0 {
			break
		}
	}
	return best
}

// releaseSlotLocked returns slot i to the free list.
func (s *Server) releaseSlotLocked(i int) {
	from := s.slots[i].j.from
	if s.inflight[from]--; s.inflight[from] <= 0 {
		delete(s.inflight, from)
	}
	s.slots[i] = srvSlot{idx: i}
	s.free = append(s.free, i)
}

// queueLocked puts slot i on the dispatcher's list.
func (s *Server) queueLocked(i int) {
	if sl := &s.slots[i]; !sl.queued {
		sl.queued = true
		s.events.push(i) // never full: one entry per slot at most
	}
}

func (s *Server) span(slot int) rdmaops.Span {
	return s.region.Span(slot*s.blockSize, s.blockSize)
}

// start issues the RDMA for j in slot i. Its completion, also a failure
// to send, comes back through completed as an event.
func (s *Server) start(ctx context.Context, i int, j job) {
	if s.testDepth != nil {
		s.testDepth()
	}
	local := s.span(i)
	var op rdmaops.Op
	var pl [headerLen]byte
	var l [1]rdmaops.Span
	l[0] = local
	op.Remote = cmsg.Cookie(j.req.Cookie)
	op.Local = l[:]
	op.Deadline = time.Now().Add(s.timeout)
	op.Keep = &s.slots[i]
	if j.req.Op == opRead {
		if _, err := s.f.ReadAt(local.Bytes(), int64(j.req.Block)*int64(s.blockSize)); err != nil && err != io.EOF {
			s.mu.Lock()
			s.releaseSlotLocked(i)
			s.mu.Unlock()
			s.fail(ctx, j.from, &j.req, errIO, 0, true)
			return
		}
		op.Write = true
		op.Payload = (&msg{Op: opReadDone, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf, CRC: crc32.ChecksumIEEE(local.Bytes())}).encode(pl[:])
	} else {
		op.Payload = (&msg{Op: opWriteFetched, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf}).encode(pl[:])
		op.Flags = cmsg.FlagFence // the client learns its buffer is free only after the READ
	}
	// A failure to send completes the operation as NotSent, through
	// completed, before Do returns.
	s.c.Do(ctx, j.from, &op)
}

// completed runs when the tracker reports a transfer's status, in the
// goroutine that completed it (the receive loop, the deadline timer, or
// the dispatcher for a failure to send). It only records the status for
// the dispatcher. The slot stays in use until released says its memory is
// free: with the status for most transfers, but for one that passed its
// deadline only when the kernel's late status arrives or the socket is
// closed, since until then the kernel may still read or write it.
func (s *Server) completed(c barrier.Completion) {
	sl, ok := c.Keep.(*srvSlot)
	if !ok {
		return
	}
	s.mu.Lock()
	sl.reported, sl.status, sl.tok = true, c.Status, c.Token
	if c.Status == barrier.TimedOut && !sl.freed {
		sl.wasHeld = true
		s.held.Add(1)
		s.stats.TimedOut++
	}
	s.queueLocked(sl.idx)
	s.mu.Unlock()
	s.wake(s.kick)
}

// released runs when the tracker releases a transfer (barrier's
// OnRelease): the kernel no longer touches the slot's memory.
func (s *Server) released(c barrier.Completion) {
	sl, ok := c.Keep.(*srvSlot)
	if !ok {
		return
	}
	s.mu.Lock()
	sl.freed = true
	if sl.wasHeld {
		sl.wasHeld = false
		s.held.Add(-1)
		if !s.closed {
			s.stats.LateFreed++
		}
	}
	s.queueLocked(sl.idx)
	s.mu.Unlock()
	s.wake(s.kick)
}

// writer writes fetched blocks to the file, fsyncs, and confirms. When
// Serve ends it finishes the writes already fetched.
func (s *Server) writer(ctx context.Context) {
	defer s.workers.Done()
	for {
		select {
		case i := <-s.writes:
			s.writeBlock(ctx, i)
		case <-s.quit:
			for {
				select {
				case i := <-s.writes:
					s.writeBlock(ctx, i)
				default:
					return
				}
			}
		}
	}
}

func (s *Server) writeBlock(ctx context.Context, i int) {
	s.mu.Lock()
	j := s.slots[i].j
	s.mu.Unlock()
	data := s.span(i).Bytes()
	switch {
	case crc32.ChecksumIEEE(data) != j.req.CRC:
		s.fail(ctx, j.from, &j.req, errChecksum, 0, true)
	default:
		_, err := s.f.WriteAt(data, int64(j.req.Block)*int64(s.blockSize))
		if err == nil {
			err = s.f.Sync()
		}
		if err != nil {
			s.fail(ctx, j.from, &j.req, errIO, 0, true)
			break
		}
		s.mu.Lock()
		s.stats.Writes++
		s.stats.Syncs++
		s.mu.Unlock()
		s.reply(ctx, j.from, &msg{Op: opWriteDone, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf, CRC: j.req.CRC}, true)
	}
	s.mu.Lock()
	s.slots[i].writing = false
	s.queueLocked(i)
	s.mu.Unlock()
	s.wake(s.kick)
}

// summer answers checksum requests, one at a time, apart from transfers
// and completions.
func (s *Server) summer(ctx context.Context) {
	defer s.workers.Done()
	for {
		select {
		case <-s.sumKick:
		case <-s.quit:
			return
		}
		for {
			s.mu.Lock()
			j, ok := s.sums.pop()
			s.mu.Unlock()
			if !ok {
				break
			}
			sum, err := s.fileSum()
			if err != nil {
				s.fail(ctx, j.from, &j.req, errIO, 0, true)
			} else {
				s.reply(ctx, j.from, &msg{Op: opSumReply, ID: j.req.ID, Sum: sum}, true)
			}
			s.mu.Lock()
			if s.sumsFrom[j.from]--; s.sumsFrom[j.from] <= 0 {
				delete(s.sumsFrom, j.from)
			}
			s.mu.Unlock()
		}
	}
}

func (s *Server) fileSum() ([32]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(s.f, 0, int64(s.nblocks)*int64(s.blockSize))); err != nil {
		return [32]byte{}, err
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// FileSum returns the SHA-256 of the exported file.
func (s *Server) FileSum() ([32]byte, error) { return s.fileSum() }

// Close closes the server's socket, which makes the kernel cancel every
// RDMA operation still queued and drop their keys, completes all pending
// operations (barrier.Canceled), frees the slots held after timeouts,
// waits for Serve's workers, and unmaps the server's memory.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.c.Close() // the tracker releases every operation, held ones too
	s.workers.Wait()
	s.c.Tracker().Close()
	if rerr := s.region.Close(); rerr != nil {
		return rerr
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil // the caller closed the socket already
	}
	return err
}

// refusalsPerSecond is how many refusals (error replies to messages the
// server will not serve: malformed, unknown, a full backlog) one client
// gets a second; the messages refused beyond it get no reply
// (ServerStats.Unanswered). The receive loop sends refusals without
// waiting, so a client flooding the server would otherwise have it send
// one reply per message, and those replies fill the server socket's send
// buffer, which the transfers to every client need too: in
// TestBlockServerBacklogFlood on Linux 7.2, an unpaced flood drew about
// 8,500 busy refusals a second, and another client's transfers then
// failed to send as often as they went through.
const refusalsPerSecond = 64

// refusalBudget counts each client's refusals in one-second windows,
// in a fixed table indexed by a hash of the client's address, so that its
// memory stays the same whatever addresses peers send from; clients that
// share a slot share its budget.
type refusalBudget struct {
	window time.Time // the start of the current second
	counts [256]uint16
}

// allow counts a refusal to client to at time now and reports
// whether it is within the client's budget for the second.
func (b *refusalBudget) allow(to netip.AddrPort, now time.Time) bool {
	if now.Sub(b.window) >= time.Second || now.Before(b.window) {
		b.window = now
		b.counts = [256]uint16{}
	}
	a := to.Addr().As16()
	h := uint32(2166136261) // FNV-1a over the address and the port
	for _, c := range a {
		h = (h ^ uint32(c)) * 16777619
	}
	h = (h ^ uint32(to.Port()&0xff)) * 16777619
	h = (h ^ uint32(to.Port()>>8)) * 16777619
	n := &b.counts[h%uint32(len(b.counts))]
	if *n >= refusalsPerSecond {
		return false
	}
	*n++
	return true
}
