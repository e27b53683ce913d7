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
	"time"

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
	Dropped            uint64 // refused without a reply: server-to-client kinds (counted in UnknownOps too)

	Announcements uint64 // buffer registrations announced by clients
}

// A Server exports a file as numbered blocks of BlockSize bytes over RDS
// RDMA. A read request carries the client's cookie: the server reads the
// block into one of its own buffers and RDMA-writes it into the client's
// memory with immediate data "block N is in your buffer". A write request
// too: the server RDMA-reads the client's buffer, the immediate data of
// that READ tells the client its buffer is free, and once the block is
// written and fsynced a separate message confirms it.
type Server struct {
	sock      *rdssock.Conn
	c         *rdmaops.Conn
	f         *os.File
	blockSize int
	nblocks   uint64
	region    *rdmaops.Region
	timeout   time.Duration

	cookies cookieTable // touched by Serve's goroutine only

	mu      sync.Mutex
	free    []int // free local slots
	backlog []job // requests waiting for a slot
	stats   ServerStats
	writes  chan *job // completed RDMA READs waiting to be written and synced
	wdone   chan struct{}
	stopped bool
}

type job struct {
	req  msg
	from netip.AddrPort
	slot int
}

// ServerConfig configures a Server.
type ServerConfig struct {
	BlockSize int           // bytes per block (default 8 KiB; at most 1 MiB)
	Slots     int           // local buffers, the most transfers in flight (default 8)
	Timeout   time.Duration // deadline of each RDMA operation (default 30s)
}

// NewServer returns a server for f on sock, which must be bound to an
// address of an RDMA device. The file's size must be a multiple of the
// block size.
func NewServer(sock *rdssock.Conn, f *os.File, cfg *ServerConfig) (*Server, error) {
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
		sock: sock, f: f, blockSize: c.BlockSize, nblocks: uint64(fi.Size()) / uint64(c.BlockSize),
		region: region, timeout: c.Timeout,
		writes: make(chan *job, c.Slots), wdone: make(chan struct{}),
	}
	for i := range c.Slots {
		s.free = append(s.free, i)
	}
	s.c = rdmaops.New(sock, barrier.New(&barrier.Config{OnComplete: s.completed}), nil)
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
func (s *Server) Serve(ctx context.Context) (clientSum [32]byte, err error) {
	go s.writer()
	defer func() {
		close(s.writes)
		<-s.wdone
	}()
	buf, oob := make([]byte, 4096), make([]byte, 32*cmsg.RDMAStatusSpace)
	for {
		n, oobn, _, from, rerr := s.sock.ReadMsgContext(ctx, buf, oob)
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
		m, status, aux := parseRequest(buf[:n], truncated, s.nblocks)
		if status == 0 && (m.Op == opRead || m.Op == opWrite) && !s.cookies.valid(from, m.Buf, m.Cookie) {
			status = errBadCookie
		}
		if status != 0 {
			s.refuse(ctx, from, &m, status, aux)
			continue
		}
		switch m.Op {
		case opAnnounce:
			if !hasDest {
				s.refuse(ctx, from, &m, errMalformed, malNoCookie)
				continue
			}
			if lim := s.cookies.announce(from, m.Buf, uint64(dest)); lim != 0 {
				s.refuse(ctx, from, &m, errLimit, lim)
				continue
			}
			s.mu.Lock()
			s.stats.Announcements++
			s.mu.Unlock()
		case opPing:
			s.reply(ctx, from, &msg{Op: opPong, ID: m.ID, Block: s.nblocks, Buf: uint32(s.blockSize)})
		case opRead, opWrite:
			s.dispatch(ctx, job{req: m, from: from, slot: -1})
		case opSum:
			s.writes <- &job{req: m, from: from, slot: -1} // after the writes queued before it
		case opBye:
			return m.Sum, nil
		}
	}
}

func (s *Server) reply(ctx context.Context, to netip.AddrPort, m *msg) {
	var b [headerLen]byte
	s.sock.WriteMsgContext(ctx, m.encode(b[:]), nil, to)
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
	case status == errLimit:
		st.OverLimit++
	}
	drop := status == errUnknownOp && isReplyKind(uint8(aux))
	if drop {
		st.Dropped++
	}
	s.mu.Unlock()
	if !drop {
		s.fail(ctx, to, m, status, aux)
	}
}

func (s *Server) fail(ctx context.Context, to netip.AddrPort, req *msg, status uint8, aux uint16) {
	s.mu.Lock()
	s.stats.Errors++
	s.mu.Unlock()
	s.reply(ctx, to, &msg{Op: opError, ID: req.ID, Block: req.Block, Buf: req.Buf, Status: status, Aux: aux})
}

// dispatch starts j in a free slot or queues it.
func (s *Server) dispatch(ctx context.Context, j job) {
	s.mu.Lock()
	if len(s.free) == 0 {
		s.backlog = append(s.backlog, j)
		s.mu.Unlock()
		return
	}
	j.slot = s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.mu.Unlock()
	s.start(ctx, j)
}

// freeSlot returns slot to the free list, or hands it to a queued request.
func (s *Server) freeSlot(slot int) {
	s.mu.Lock()
	if len(s.backlog) == 0 {
		s.free = append(s.free, slot)
		s.mu.Unlock()
		return
	}
	j := s.backlog[0]
	s.backlog = s.backlog[1:]
	s.mu.Unlock()
	j.slot = slot
	s.start(context.Background(), j)
}

func (s *Server) span(slot int) rdmaops.Span {
	return s.region.Span(slot*s.blockSize, s.blockSize)
}

// start issues the RDMA for j, which owns a slot.
func (s *Server) start(ctx context.Context, j job) {
	local := s.span(j.slot)
	jp := &job{req: j.req, from: j.from, slot: j.slot}
	var op rdmaops.Op
	var pl [headerLen]byte
	op.Remote = cmsg.Cookie(j.req.Cookie)
	op.Local = []rdmaops.Span{local}
	op.Deadline = time.Now().Add(s.timeout)
	op.Keep = jp
	if j.req.Op == opRead {
		if _, err := s.f.ReadAt(local.Bytes(), int64(j.req.Block)*int64(s.blockSize)); err != nil && err != io.EOF {
			s.fail(ctx, j.from, &j.req, errIO, 0)
			s.freeSlot(j.slot)
			return
		}
		op.Write = true
		op.Payload = (&msg{Op: opReadDone, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf, CRC: crc32.ChecksumIEEE(local.Bytes())}).encode(pl[:])
	} else {
		op.Payload = (&msg{Op: opWriteFetched, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf}).encode(pl[:])
		op.Flags = cmsg.FlagFence // the client learns its buffer is free only after the READ
	}
	if _, err := s.c.Do(ctx, j.from, &op); err != nil {
		// NotSent completion already released the slot through completed.
		return
	}
}

// completed runs for every finished RDMA (from the goroutine that read its
// status): a READ of client data goes on to the writer; a WRITE of a block
// frees its slot.
func (s *Server) completed(c barrier.Completion) {
	j, ok := c.Keep.(*job)
	if !ok {
		return
	}
	if c.Status != barrier.Success {
		s.mu.Lock()
		s.stats.RDMAFailures++
		s.mu.Unlock()
		s.fail(context.Background(), j.from, &j.req, errTransfer, uint16(c.Status))
		s.freeSlot(j.slot)
		return
	}
	if j.req.Op == opRead {
		s.mu.Lock()
		s.stats.Reads++
		s.mu.Unlock()
		s.freeSlot(j.slot)
		return
	}
	s.writes <- j
}

// writer writes fetched blocks to the file, fsyncs, and confirms.
func (s *Server) writer() {
	defer close(s.wdone)
	ctx := context.Background()
	for j := range s.writes {
		if j.req.Op == opSum {
			sum, err := s.fileSum()
			if err != nil {
				s.fail(ctx, j.from, &j.req, errIO, 0)
				continue
			}
			s.reply(ctx, j.from, &msg{Op: opSumReply, ID: j.req.ID, Sum: sum})
			continue
		}
		data := s.span(j.slot).Bytes()
		switch {
		case crc32.ChecksumIEEE(data) != j.req.CRC:
			s.fail(ctx, j.from, &j.req, errChecksum, 0)
		default:
			_, err := s.f.WriteAt(data, int64(j.req.Block)*int64(s.blockSize))
			if err == nil {
				err = s.f.Sync()
			}
			if err != nil {
				s.fail(ctx, j.from, &j.req, errIO, 0)
				break
			}
			s.mu.Lock()
			s.stats.Writes++
			s.stats.Syncs++
			s.mu.Unlock()
			s.reply(ctx, j.from, &msg{Op: opWriteDone, ID: j.req.ID, Block: j.req.Block, Buf: j.req.Buf, CRC: j.req.CRC})
		}
		s.freeSlot(j.slot)
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

// Close releases the server's memory once no transfer is in flight.
func (s *Server) Close() error {
	s.c.Tracker().Close()
	return s.region.Close()
}
