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
// Each side prints one RESULT line.
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
	if cfg.depth < 1 || cfg.size < 16 || cfg.ops < 1 || slots(&cfg)*cfg.size > rdmaops.MaxTransfer {
		return fmt.Errorf("-depth %d, -size %d, -ops %d: want depth >= 1, size >= 16, ops >= 1, 4*depth*size <= %d", cfg.depth, cfg.size, cfg.ops, rdmaops.MaxTransfer)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	// WaitCongested: a send to a congested port waits in the runtime
	// poller instead of failing.
	sock, err := rdssock.Listen(cfg.local, &rdssock.Config{WaitCongested: true})
	if err != nil {
		return err
	}
	c := rdmaops.New(sock, nil, nil)
	defer c.Close()
	if cfg.role == "passive" {
		return passive(ctx, c, &cfg, out)
	}
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

// passive registers its buffer once the active side says hello, then
// reads the immediate data of every operation and verifies WRITEs in
// place, until the active side says done.
func passive(ctx context.Context, c *rdmaops.Conn, cfg *config, out io.Writer) error {
	region, err := rdmaops.NewRegion(slots(cfg) * cfg.size)
	if err != nil {
		return err
	}
	defer region.Close()
	mem := region.Bytes()[:slots(cfg)*cfg.size]
	for off := range mem {
		mem[off] = readByte(off)
	}
	buf := make([]byte, 256)
	var registered bool
	var got, verified, bad uint64
	var ack [32]byte
	for {
		m, err := c.ReadMsg(ctx, buf, nil)
		if err != nil {
			return err
		}
		if m.From != cfg.peer {
			continue
		}
		msg := buf[:m.N]
		switch {
		case string(msg) == "hello":
			if registered {
				continue // a repeated hello
			}
			// The cookie travels to the peer with this message.
			if _, err := c.Register(ctx, region.Span(0, len(mem)), cmsg.FlagReadWrite, cfg.peer, []byte("buffer")); err != nil {
				return fmt.Errorf("register: %w", err)
			}
			registered = true
		case len(msg) == 16:
			// Immediate data: operation seq, into or from slot.
			seq, slot := binary.LittleEndian.Uint64(msg), int(binary.LittleEndian.Uint64(msg[8:]))
			got++
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
			if got%uint64(cfg.depth) == 0 {
				// Acknowledge, so the active side may use the slots
				// of the operations seen so far again.
				if _, err := c.Socket().WriteMsgContext(ctx, strconv.AppendUint(append(ack[:0], "ack "...), got, 10), nil, cfg.peer, 0); err != nil {
					return err
				}
			}
		case len(msg) > 5 && string(msg[:5]) == "done ":
			var n uint64
			fmt.Sscan(string(msg[5:]), &n)
			fmt.Fprintf(out, "RESULT role=passive op=%s ops=%d immediate=%d verified=%d bad=%d\n", cfg.op, n, got, verified, bad)
			if got != n || bad != 0 {
				return fmt.Errorf("%d operations, %d immediate data messages, %d with bad data", n, got, bad)
			}
			return nil
		}
	}
}

// active learns the passive side's cookie, then keeps depth operations in
// flight: it waits for the oldest one before it reuses its local slot, and
// for the passive side's acknowledgement before it reuses a remote slot.
func active(ctx context.Context, c *rdmaops.Conn, cfg *config, out io.Writer) error {
	cookie, err := hello(ctx, c, cfg)
	if err != nil {
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
	for i := range ops {
		spans[i] = region.Span(i*cfg.size, cfg.size)
		ops[i] = rdmaops.Op{Write: cfg.op == "write", Remote: cookie, Local: spans[i : i+1], Payload: imm[i][:]}
		if cfg.op == "read" {
			// The immediate data goes out once the READ is done.
			ops[i].Flags = cmsg.FlagFence
		}
	}
	var failed, verified, acked uint64
	buf := make([]byte, 64)
	// finish waits for the operation in slot i and checks it.
	finish := func(i int) error {
		st, err := c.Wait(ctx, toks[i])
		if err != nil {
			return err
		}
		if st.Err() != nil {
			failed++
			return nil
		}
		if cfg.op == "read" {
			rs := int(seqs[i] % uint64(slots(cfg)))
			b := spans[i].Bytes()
			for j := range b {
				if b[j] != readByte(rs*cfg.size+j) {
					return fmt.Errorf("READ %d: byte %d is %#x, want %#x", seqs[i], j, b[j], readByte(rs*cfg.size+j))
				}
			}
		}
		verified++
		return nil
	}
	start := time.Now()
	for seq := uint64(0); seq < uint64(cfg.ops); seq++ {
		i := int(seq % uint64(cfg.depth))
		if seq >= uint64(cfg.depth) {
			if err := finish(i); err != nil {
				return err
			}
		}
		// The passive side's slot rs is free once it acknowledged the
		// operation that used it before. Its acknowledgements are
		// ordinary messages: ReadMsg returns them, also those that
		// arrived while Wait was reading the socket.
		for seq >= acked+uint64(slots(cfg)) {
			m, err := c.ReadMsg(ctx, buf, nil)
			if err != nil {
				return fmt.Errorf("waiting for an acknowledgement: %w", err)
			}
			if n, ok := parseAck(buf[:m.N]); ok && m.From == cfg.peer && n > acked {
				acked = n
			}
		}
		rs := seq % uint64(slots(cfg))
		op := &ops[i]
		op.RemoteOffset = rs * uint64(cfg.size)
		if op.Write {
			fillWrite(spans[i].Bytes(), seq)
		} else {
			clear(spans[i].Bytes())
		}
		binary.LittleEndian.PutUint64(imm[i][:], seq)
		binary.LittleEndian.PutUint64(imm[i][8:], rs)
		seqs[i] = seq
		toks[i], err = c.Do(ctx, cfg.peer, op)
		if err != nil {
			return fmt.Errorf("operation %d: %w", seq, err)
		}
	}
	for seq := max(0, cfg.ops-cfg.depth); seq < cfg.ops; seq++ {
		if err := finish(seq % cfg.depth); err != nil {
			return err
		}
	}
	secs := time.Since(start).Seconds()
	if _, err := c.Socket().WriteMsgContext(ctx, fmt.Appendf(nil, "done %d", cfg.ops), nil, cfg.peer, 0); err != nil {
		return err
	}
	fmt.Fprintf(out, "RESULT role=active op=%s depth=%d size=%d ops=%d secs=%.3f rate=%.1f failed=%d verified=%d\n",
		cfg.op, cfg.depth, cfg.size, cfg.ops, secs, float64(cfg.ops)/secs, failed, verified)
	if failed > 0 {
		return fmt.Errorf("%d of %d operations failed", failed, cfg.ops)
	}
	return nil
}

// hello says hello to the passive side until its announcement arrives,
// and returns the cookie.
func hello(ctx context.Context, c *rdmaops.Conn, cfg *config) (cmsg.Cookie, error) {
	buf := make([]byte, 64)
	for {
		if _, err := c.Socket().WriteMsgContext(ctx, []byte("hello"), nil, cfg.peer, 0); err != nil && !errors.Is(err, rdssock.ErrCongested) {
			return 0, err
		}
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		m, err := c.ReadMsg(rctx, buf, nil)
		cancel()
		switch {
		case err == nil && m.HasDest && m.From == cfg.peer:
			return m.Dest, nil
		case ctx.Err() != nil:
			return 0, fmt.Errorf("no buffer announced by %v: %w", cfg.peer, ctx.Err())
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
