//go:build linux

// Command rdmawrite is the rdmaops package example as a program: a
// passive side registers a buffer and announces it, an active side issues
// RDMA WRITEs with immediate data or RDMA READs against it, a given number
// of them in flight, and reports operations per second. Both sides verify
// the data. It uses only the public API, the way the package
// documentation teaches it: ReadMsg for messages, Do and Wait for
// operations, no receive loop of its own.
//
// Run it on two RDS/IB addresses (two hosts, or one host with two
// addresses on one RDMA device), passive side first:
//
//	rdmawrite -role passive -local 10.0.0.1:4000 -peer 10.0.0.2:4000
//	rdmawrite -role active -local 10.0.0.2:4000 -peer 10.0.0.1:4000 -op write -depth 16
//
// Each side prints one RESULT line. -duration issues operations for a
// time instead of a count; -verify=false on both sides leaves the data
// unchecked and the acknowledgements out, so that what remains is the
// API's own work (rdsbench measures it so against C).
//
// It survives the loss of its RDS/IB connection: the passive side drops
// its key and registers again, the active side lets its operations in
// flight finish and issues the failed ones again (see the protocol notes
// in the source).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rdmawrite:", err)
		os.Exit(1)
	}
}

type config struct {
	role        string
	local, peer netip.AddrPort
	op          string
	depth, size int
	ops         int
	duration    time.Duration
	verify      bool
	timeout     time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rdmawrite", flag.ContinueOnError)
	var cfg config
	var local, peer string
	fs.StringVar(&cfg.role, "role", "active", "active (issues the operations) or passive (registers its buffer)")
	fs.StringVar(&local, "local", "", "local RDS address ip:port (on an RDMA device)")
	fs.StringVar(&peer, "peer", "", "the other side's address ip:port")
	fs.StringVar(&cfg.op, "op", "write", "write (RDMA WRITE with immediate data) or read (RDMA READ with notify)")
	fs.IntVar(&cfg.depth, "depth", 16, "operations in flight")
	fs.IntVar(&cfg.size, "size", 4096, "bytes per operation")
	fs.IntVar(&cfg.ops, "ops", 10000, "operations to issue")
	fs.DurationVar(&cfg.duration, "duration", 0, "issue operations for this long instead of -ops (active side)")
	fs.BoolVar(&cfg.verify, "verify", true, "check the data of every operation; false on both sides leaves the data alone and the passive side acknowledges nothing, which measures the API without the checks")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.local, err = netip.ParseAddrPort(local); err != nil {
		return fmt.Errorf("-local: %w", err)
	}
	if cfg.peer, err = netip.ParseAddrPort(peer); err != nil {
		return fmt.Errorf("-peer: %w", err)
	}
	if cfg.op != "write" && cfg.op != "read" {
		return fmt.Errorf("-op %q: want write or read", cfg.op)
	}
	if cfg.depth < 1 || cfg.size < 16 || cfg.ops < 1 || cfg.duration < 0 || slots(&cfg)*cfg.size > rdmaops.MaxTransfer {
		return fmt.Errorf("-depth %d, -size %d, -ops %d, -duration %v: want depth >= 1, size >= 16, ops >= 1, duration >= 0, 4*depth*size <= %d", cfg.depth, cfg.size, cfg.ops, cfg.duration, rdmaops.MaxTransfer)
	}
	if cfg.duration >= cfg.timeout {
		return fmt.Errorf("-duration %v: want it shorter than -timeout %v", cfg.duration, cfg.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	// WaitCongested: a send to a congested port waits instead of
	// failing.
	open := func() (*rdmaops.Conn, error) {
		sock, err := rdssock.Listen(cfg.local, &rdssock.Config{WaitCongested: true})
		if err != nil {
			return nil, err
		}
		return rdmaops.New(sock, nil, nil), nil
	}
	if cfg.role == "passive" {
		return passive(ctx, open, &cfg, out)
	}
	c, err := open()
	if err != nil {
		return err
	}
	defer c.Close()
	return active(ctx, c, &cfg, out)
}

// slots is the number of operation-sized slots in the passive side's
// buffer: operation i uses slot i mod slots.
func slots(cfg *config) int { return 4 * cfg.depth }

// writeByte is byte j of the data operation seq writes; the first 8 bytes
// hold seq itself.
func writeByte(seq uint64, j int) byte { return byte(seq*31 + uint64(j)*7 + 1) }

// fillWrite fills b with operation seq's data.
func fillWrite(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for j := 8; j < len(b); j++ {
		b[j] = writeByte(seq, j)
	}
}

// checkWrite reports whether b holds operation seq's data.
func checkWrite(b []byte, seq uint64) bool {
	if binary.LittleEndian.Uint64(b) != seq {
		return false
	}
	for j := 8; j < len(b); j++ {
		if b[j] != writeByte(seq, j) {
			return false
		}
	}
	return true
}

// readByte is the byte at offset off of the passive side's buffer, which
// READs fetch.
func readByte(off int) byte { return byte(off*13 + off>>8 + 5) }

// The protocol. The active side says "hello E" for its epoch E (1, then
// one more after each recovery); the passive side registers its buffer
// for the first hello of a new epoch and announces the key with
// "buffer E N R". "ack N" says that the passive side has the immediate
// data of operations 0..N-1. "reset R N" says that the passive side lost
// contact and dropped its key (its Rth time). "done N" ends the run and
// "bye" answers it.
//
// Recovery. When an RDS/IB connection goes down, the kernel cannot finish
// shutting it down, and so cannot reconnect, while a registration made
// over it is alive: only closing the socket that holds it lets go (see
// the BUG notes of package rdmaops). Until then no message and no
// operation status gets through. So the passive side, after a quiet
// second with its connection to the peer not up, closes its socket,
// opens it again and says "reset". Once the connection is back, the
// kernel reports the operations that were on their way as dropped (it
// never retransmits RDMA), with their immediate data; the active side
// lets every operation in flight finish, asks for a new key and issues
// again from the first operation that failed. The passive side takes the
// immediate data of each operation once, in order.

// quiet is how long the passive side waits for a message before it looks
// at its connection, and how long the active side waits for an answer
// before it says hello again.
const quiet = time.Second

// connUp reports whether the kernel's connection from the local address
// to the peer's is up.
func connUp(c *rdmaops.Conn, cfg *config) bool {
	v4 := cfg.local.Addr().Is4()
	conns, err := c.Socket().Connections()
	if err != nil {
		return true // cannot tell: keep waiting
	}
	for _, cn := range conns {
		// IPv6 rows carry no TOS (the kernel's RDS6 table has none).
		if cn.Local == cfg.local.Addr() && cn.Remote == cfg.peer.Addr() && (!v4 || cn.TOS == 0) {
			return cn.Connected
		}
	}
	return false
}

// passive registers its buffer when the active side says hello, then
// reads the immediate data of every operation and verifies WRITEs in
// place, until the active side says done. It recovers from a lost
// connection as described above.
func passive(ctx context.Context, open func() (*rdmaops.Conn, error), cfg *config, out io.Writer) error {
	region, err := rdmaops.NewRegion(slots(cfg) * cfg.size)
	if err != nil {
		return err
	}
	defer region.Close()
	mem := region.Bytes()[:slots(cfg)*cfg.size]
	for off := range mem {
		mem[off] = readByte(off)
	}
	c, err := open()
	if err != nil {
		return err
	}
	var mr *rdmaops.MR
	defer func() {
		c.Close()
		if mr != nil {
			mr.Free()
		}
	}()
	buf := make([]byte, 256)
	var epoch, next, dup, gap, verified, bad, resets uint64
	var ack [64]byte
	send := func(ctx context.Context, b []byte) error {
		_, err := c.Socket().WriteMsgContext(ctx, b, nil, cfg.peer, 0)
		return err
	}
	// One context bounds the reads of a whole second, not one per read: a
	// context with a timeout costs a timer and a few allocations, more
	// than the read. A second in which nothing came is quiet.
	var second struct {
		ctx    context.Context
		cancel context.CancelFunc
		heard  bool // a message came in it
	}
	defer func() {
		if second.cancel != nil {
			second.cancel()
		}
	}()
	for {
		if second.ctx == nil {
			second.ctx, second.cancel = context.WithTimeout(ctx, quiet)
			second.heard = false
		}
		m, err := c.ReadMsg(second.ctx, buf, nil)
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			second.cancel()
			second.ctx = nil
			if second.heard {
				continue // not a quiet second
			}
			if mr != nil && !connUp(c, cfg) {
				// Lost contact: only closing the socket lets the
				// kernel reconnect.
				c.Close()
				mr.Free()
				mr = nil
				resets++
				if c, err = open(); err != nil {
					return err
				}
			}
			if mr == nil && resets > 0 {
				sctx, cancel := context.WithTimeout(ctx, quiet)
				send(sctx, fmt.Appendf(ack[:0], "reset %d %d", resets, next))
				cancel()
			}
			continue
		}
		second.heard = true
		if m.From != cfg.peer {
			continue
		}
		msg := buf[:m.N]
		switch {
		case len(msg) > 6 && string(msg[:6]) == "hello ":
			e, _ := strconv.ParseUint(string(msg[6:]), 10, 64)
			if mr != nil && e <= epoch {
				continue // a repeated hello
			}
			if mr != nil {
				mr.Free()
				mr = nil
			}
			// The key travels to the peer with this message.
			mr, err = c.Register(ctx, region.Span(0, len(mem)), cmsg.FlagReadWrite, cfg.peer, fmt.Appendf(nil, "buffer %d %d %d", e, next, resets))
			if err != nil {
				// The connection may be coming up again: the next
				// hello tries again.
				fmt.Fprintf(os.Stderr, "rdmawrite: register: %v\n", err)
				mr = nil
				continue
			}
			epoch = e
		case len(msg) == 16:
			// Immediate data: operation seq, into or from slot.
			seq, slot := binary.LittleEndian.Uint64(msg), int(binary.LittleEndian.Uint64(msg[8:]))
			switch {
			case seq < next:
				// Its operation was reported failed after it
				// executed, and issued again.
				dup++
				continue
			case seq > next:
				gap++
				continue
			}
			next++
			if !cfg.verify {
				continue
			}
			if cfg.op == "write" {
				// The WRITE's data is in place before its immediate
				// data arrives, and the slot is not written again
				// before the acknowledgement below.
				if slot < slots(cfg) && checkWrite(mem[slot*cfg.size:(slot+1)*cfg.size], seq) {
					verified++
				} else {
					bad++
				}
			}
			if next%uint64(cfg.depth) == 0 {
				// Acknowledge, so the active side may use the slots
				// of the operations seen so far again.
				if err := send(ctx, strconv.AppendUint(append(ack[:0], "ack "...), next, 10)); err != nil {
					return err
				}
			}
		case len(msg) > 5 && string(msg[:5]) == "done ":
			n, _ := strconv.ParseUint(string(msg[5:]), 10, 64)
			if err := send(ctx, []byte("bye")); err != nil {
				return err
			}
			fmt.Fprintf(out, "RESULT role=passive op=%s ops=%d immediate=%d verified=%d bad=%d duplicate=%d gap=%d resets=%d\n", cfg.op, n, next, verified, bad, dup, gap, resets)
			lingerBye(ctx, c, cfg, buf)
			if next != n || bad != 0 || gap != 0 {
				return fmt.Errorf("%d operations, %d immediate data messages, %d with bad data, %d out of order", n, next, bad, gap)
			}
			return nil
		}
	}
}

// lingerBye answers a repeated "done" until the active side is quiet.
func lingerBye(ctx context.Context, c *rdmaops.Conn, cfg *config, buf []byte) {
	for {
		rctx, cancel := context.WithTimeout(ctx, quiet/2)
		m, err := c.ReadMsg(rctx, buf, nil)
		cancel()
		if err != nil {
			return
		}
		if m.From == cfg.peer && m.N > 5 && string(buf[:5]) == "done " {
			c.Socket().WriteMsgContext(ctx, []byte("bye"), nil, cfg.peer, 0)
		}
	}
}

// peerState is what the active side knows of the passive side.
type peerState struct {
	cookie cmsg.Cookie
	epoch  uint64 // of the hello that cookie answered
	acked  uint64 // operations whose immediate data the passive side has
	resets uint64 // highest "reset R" seen
	stale  bool   // the passive side dropped the key
}

// note takes in a message from the passive side other than a key.
func (p *peerState) note(msg []byte) {
	if n, ok := parseAck(msg); ok {
		p.acked = max(p.acked, n)
		return
	}
	var r, n uint64
	if k, _ := fmt.Sscanf(string(msg), "reset %d %d", &r, &n); k == 2 {
		p.acked = max(p.acked, n)
		if r > p.resets {
			p.resets = r
			p.stale = true
		}
	}
}

// active learns the passive side's key, then keeps depth operations in
// flight: it waits for the oldest one before it reuses its local slot, and
// for the passive side's acknowledgement before it reuses a remote slot.
// When an operation fails or the passive side reports a reset, it lets
// the operations in flight finish, asks for a new key and goes back to
// the first operation that failed.
func active(ctx context.Context, c *rdmaops.Conn, cfg *config, out io.Writer) error {
	var peer peerState
	if err := hello(ctx, c, cfg, &peer); err != nil {
		return err
	}
	region, err := rdmaops.NewRegion(cfg.depth * cfg.size)
	if err != nil {
		return err
	}
	defer region.Close()
	ops := make([]rdmaops.Op, cfg.depth)
	spans := make([]rdmaops.Span, cfg.depth)
	imm := make([][16]byte, cfg.depth)
	seqs := make([]uint64, cfg.depth)
	toks := make([]barrier.Token, cfg.depth)
	busy := make([]bool, cfg.depth)
	for i := range ops {
		spans[i] = region.Span(i*cfg.size, cfg.size)
		ops[i] = rdmaops.Op{Write: cfg.op == "write", Local: spans[i : i+1], Payload: imm[i][:]}
		if cfg.op == "read" {
			// The immediate data goes out once the READ is done.
			ops[i].Flags = cmsg.FlagFence
		}
	}
	// limit is the number of operations; with -duration it is set when
	// the time is up, to the operations issued by then.
	limit := uint64(cfg.ops)
	if cfg.duration > 0 {
		limit = noneFailed
	}
	var retried, recoveries, issued uint64
	var ok []bool            // by operation: it succeeded
	failedFrom := noneFailed // the first operation that failed
	buf := make([]byte, 64)
	// finish waits for the operation in slot i and checks it.
	finish := func(i int) error {
		busy[i] = false
		st, err := c.Wait(ctx, toks[i])
		if err != nil {
			return err
		}
		if st.Err() != nil {
			retried++
			failedFrom = min(failedFrom, seqs[i])
			return nil
		}
		if cfg.op == "read" && cfg.verify {
			rs := int(seqs[i] % uint64(slots(cfg)))
			b := spans[i].Bytes()
			for j := range b {
				if b[j] != readByte(rs*cfg.size+j) {
					return fmt.Errorf("READ %d: byte %d is %#x, want %#x", seqs[i], j, b[j], readByte(rs*cfg.size+j))
				}
			}
		}
		ok[seqs[i]] = true
		return nil
	}
	start := time.Now()
	end := start.Add(cfg.duration)
	seq := uint64(0)
	for {
	issue:
		for seq < limit && failedFrom == noneFailed && !peer.stale {
			if limit == noneFailed && !time.Now().Before(end) {
				// -duration is up: finish what was issued (after a
				// recovery, issue again up to the last one).
				limit = uint64(len(ok))
				continue
			}
			i := int(seq % uint64(cfg.depth))
			if busy[i] {
				if err := finish(i); err != nil {
					return err
				}
				if failedFrom != noneFailed {
					break
				}
			}
			// The passive side's slot rs is free once it acknowledged
			// the operation that used it before. Its acknowledgements
			// are ordinary messages: ReadMsg returns them, also those
			// that arrived while Wait was reading the socket.
			for cfg.verify && seq >= peer.acked+uint64(slots(cfg)) {
				m, err := c.ReadMsg(ctx, buf, nil)
				if err != nil {
					return fmt.Errorf("waiting for an acknowledgement: %w", err)
				}
				if m.From == cfg.peer {
					peer.note(buf[:m.N])
				}
				if peer.stale {
					break issue
				}
			}
			rs := seq % uint64(slots(cfg))
			op := &ops[i]
			op.Remote = peer.cookie
			op.RemoteOffset = rs * uint64(cfg.size)
			switch {
			case !cfg.verify:
			case op.Write:
				fillWrite(spans[i].Bytes(), seq)
			default:
				clear(spans[i].Bytes())
			}
			binary.LittleEndian.PutUint64(imm[i][:], seq)
			binary.LittleEndian.PutUint64(imm[i][8:], rs)
			seqs[i] = seq
			if seq == uint64(len(ok)) {
				ok = append(ok, false)
			}
			toks[i], err = c.Do(ctx, cfg.peer, op)
			if err != nil {
				return fmt.Errorf("operation %d: %w", seq, err)
			}
			busy[i] = true
			issued++
			seq++
		}
		// Let every operation in flight finish: a lost connection
		// reports them once it is back.
		for i := range busy {
			if busy[i] {
				if err := finish(i); err != nil {
					return err
				}
			}
		}
		if failedFrom == noneFailed && !peer.stale {
			if limit == noneFailed {
				limit = uint64(len(ok)) // -duration ended during the wait
			}
			break
		}
		// Go back to the first operation that failed, with a new key.
		seq = min(seq, failedFrom)
		failedFrom = noneFailed
		recoveries++
		peer.epoch++
		if err := hello(ctx, c, cfg, &peer); err != nil {
			return err
		}
	}
	secs := time.Since(start).Seconds()
	var succeeded uint64
	for _, v := range ok {
		if v {
			succeeded++
		}
	}
	verified := succeeded // checked as they completed
	if !cfg.verify {
		verified = 0
	}
	if err := goodbye(ctx, c, cfg, limit); err != nil {
		return err
	}
	fmt.Fprintf(out, "RESULT role=active op=%s depth=%d size=%d ops=%d secs=%.3f rate=%.1f failed=%d verified=%d retried=%d recoveries=%d issued=%d\n",
		cfg.op, cfg.depth, cfg.size, limit, secs, float64(limit)/secs, limit-succeeded, verified, retried, recoveries, issued)
	if succeeded != limit {
		return fmt.Errorf("%d of %d operations failed", limit-succeeded, limit)
	}
	return nil
}

// noneFailed is failedFrom while no operation has failed, and the limit
// of a run with -duration until the time is up.
const noneFailed = ^uint64(0)

// hello says "hello E" (E = peer.epoch, 1 the first time) to the passive
// side until its key for that epoch arrives.
func hello(ctx context.Context, c *rdmaops.Conn, cfg *config, peer *peerState) error {
	peer.epoch = max(peer.epoch, 1)
	buf := make([]byte, 64)
	for {
		if _, err := c.Socket().WriteMsgContext(ctx, fmt.Appendf(nil, "hello %d", peer.epoch), nil, cfg.peer, 0); err != nil && !errors.Is(err, rdssock.ErrCongested) {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, quiet/3)
		for {
			m, err := c.ReadMsg(rctx, buf, nil)
			if err != nil {
				break
			}
			if m.From != cfg.peer {
				continue
			}
			if !m.HasDest {
				peer.note(buf[:m.N])
				continue
			}
			var e, n, r uint64
			if k, _ := fmt.Sscanf(string(buf[:m.N]), "buffer %d %d %d", &e, &n, &r); k == 3 && e == peer.epoch {
				cancel()
				peer.cookie, peer.stale = m.Dest, false
				peer.acked = max(peer.acked, n)
				peer.resets = max(peer.resets, r)
				return nil
			}
		}
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("no buffer announced by %v: %w", cfg.peer, ctx.Err())
		}
	}
}

// goodbye says "done N" for n operations until the passive side answers
// "bye".
func goodbye(ctx context.Context, c *rdmaops.Conn, cfg *config, n uint64) error {
	buf := make([]byte, 64)
	for {
		if _, err := c.Socket().WriteMsgContext(ctx, fmt.Appendf(nil, "done %d", n), nil, cfg.peer, 0); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, quiet)
		for {
			m, err := c.ReadMsg(rctx, buf, nil)
			if err != nil {
				break
			}
			if m.From == cfg.peer && string(buf[:m.N]) == "bye" {
				cancel()
				return nil
			}
		}
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("no answer to done from %v: %w", cfg.peer, ctx.Err())
		}
	}
}

// parseAck returns N from an acknowledgement "ack N".
func parseAck(b []byte) (uint64, bool) {
	if len(b) < 5 || string(b[:4]) != "ack " {
		return 0, false
	}
	var n uint64
	for _, d := range b[4:] {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + uint64(d-'0')
	}
	return n, true
}
