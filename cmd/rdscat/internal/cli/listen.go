//go:build linux

package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/rdssock"
)

func init() {
	register(&command{
		name:    "listen",
		summary: "bind an address and print the messages it receives",
		usage:   "[flags] ADDR:PORT",
		help: `Bind an RDS socket to ADDR:PORT and write every message it receives to
standard output: by default each message followed by a newline, with -raw
the bytes exactly as received. Port 0 binds any free port (see -ready).

RDS needs no connection: any RDS socket that knows ADDR:PORT can send here.
A message of 0 bytes is a message too (it prints an empty line).

Examples:
  rdscat listen 10.0.0.2:4000
  rdscat listen -count 1 -timeout 10s 10.0.0.2:4000   one message, then exit
  rdscat listen -raw -count 4 10.0.0.2:4000 > data.bin
  rdscat listen -sender 10.0.0.2:4000                 prefix lines with the sender
  rdscat listen -echo 10.0.0.2:4000                   also send each message back
  rdscat listen -netns peer -ready addr.txt 10.0.0.2:0`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			o := &listenOpts{size: maxMessage}
			o.register(fs)
			return o.run
		},
	})
}

type listenOpts struct {
	sock    sockFlags
	count   int
	timeout time.Duration
	raw     bool
	sender  bool
	echo    bool
	ready   string
	size    sizeValue
	verbose bool
}

func (o *listenOpts) register(fs *flag.FlagSet) {
	o.sock.register(fs)
	fs.IntVar(&o.count, "count", 0, "exit after `N` messages (0: run until interrupted)")
	fs.DurationVar(&o.timeout, "timeout", 0, "exit with code 4 if no message arrives for this long (0: wait forever)")
	fs.BoolVar(&o.raw, "raw", false, "write message bytes exactly as received, with no newline after each")
	fs.BoolVar(&o.sender, "sender", false, "print each message's sender: as a \"ADDR:PORT<TAB>\" line prefix, or with -raw on standard error")
	fs.BoolVar(&o.echo, "echo", false, "send each message back to its sender")
	fs.StringVar(&o.ready, "ready", "", "write the bound ADDR:PORT to `FILE` once the socket is bound (for scripts)")
	fs.Var(&o.size, "size", "largest message to accept in `BYTES` (64k, 1m); larger ones are reported as truncated")
	fs.BoolVar(&o.verbose, "v", false, "report the bound address and transport on standard error")
}

func (o *listenOpts) run(e *env, args []string) error {
	c, err := o.open(e, args)
	if err != nil {
		return err
	}
	defer c.Close()
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	buf := make([]byte, int(o.size)+1)
	for got := 0; o.count == 0 || got < o.count; {
		n, from, done, err := o.read(e, c, buf, got)
		if done {
			return err
		}
		if !from.IsValid() {
			continue // a control-only notice, not a message
		}
		got++
		if err := o.take(e, c, out, buf[:n], from); err != nil {
			return err
		}
	}
	if o.echo {
		return drain(e, c, 10*time.Second)
	}
	return nil
}

// open checks the flags and binds the socket at the address in args; it
// reports the address (-v) and writes the -ready file.
func (o *listenOpts) open(e *env, args []string) (*rdssock.Conn, error) {
	if len(args) != 1 {
		return nil, usagef("want exactly one ADDR:PORT to listen on, got %d arguments", len(args))
	}
	ap, err := parseAddrPort("listen address", args[0])
	if err != nil {
		return nil, err
	}
	if o.count < 0 || o.timeout < 0 {
		return nil, usagef("-count and -timeout must not be negative")
	}
	if err := checkMessageSize("-size", int(o.size)); err != nil {
		return nil, err
	}
	c, err := o.sock.listen(ap, func(cfg *rdssock.Config) {
		if cfg.ReceiveBuffer == 0 && o.size > 64<<10 {
			cfg.ReceiveBuffer = 2 * int(o.size)
			cfg.ForceBuffers = os.Geteuid() == 0
		}
	})
	if err != nil {
		return nil, err
	}
	local := c.LocalAddrPort()
	if o.verbose {
		tr, _ := c.Transport()
		fmt.Fprintf(e.stderr, "rdscat: listening on %v (transport %v)\n", local, tr)
	}
	if o.ready != "" {
		if err := writeFileAtomic(o.ready, local.String()+"\n"); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// read reads one message into buf within -timeout, saying so when it was
// larger than -size and cutting it to -size. done says listening ends,
// with err (nil when interrupted); got is the count so far.
func (o *listenOpts) read(e *env, c *rdssock.Conn, buf []byte, got int) (n int, from netip.AddrPort, done bool, err error) {
	n, from, err = readWithin(e, c, buf, o.timeout)
	if err != nil && !errors.Is(err, rdssock.ErrTruncated) {
		if e.ctx.Err() != nil {
			return 0, from, true, nil // interrupted: a normal way to stop listening
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, from, true, timeoutf("no message within %v (received %d)", o.timeout, got)
		}
		return 0, from, true, err
	}
	if errors.Is(err, rdssock.ErrTruncated) || n > int(o.size) {
		fmt.Fprintf(e.stderr, "rdscat: message from %v was larger than -size %d bytes and was truncated\n", from, o.size)
		n = min(n, int(o.size))
	}
	return n, from, false, nil
}

// take writes msg from from to out (with -sender, its sender too) and
// sends it back with -echo.
func (o *listenOpts) take(e *env, c *rdssock.Conn, out *bufio.Writer, msg []byte, from netip.AddrPort) error {
	switch {
	case o.raw:
		if o.sender {
			fmt.Fprintf(e.stderr, "rdscat: %d bytes from %v\n", len(msg), from)
		}
		out.Write(msg)
	default:
		if o.sender {
			fmt.Fprintf(out, "%v\t", from)
		}
		out.Write(msg)
		out.WriteByte('\n')
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if o.echo {
		if err := sendRetry(e, c, msg, from, 10*time.Second); err != nil {
			return fmt.Errorf("echo to %v: %w", from, err)
		}
	}
	return nil
}

// readWithin reads one message, giving up after d (0: no limit) with an
// error matching context.DeadlineExceeded.
func readWithin(e *env, c *rdssock.Conn, buf []byte, d time.Duration) (int, netip.AddrPort, error) {
	ctx := e.ctx
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	n, _, _, from, err := c.ReadMsgContext(ctx, buf, nil, 0)
	return n, from, err
}

func writeFileAtomic(name, data string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// sendRetry sends one message, waiting for up to wait while the
// destination port is congested or the send buffer is full.
func sendRetry(e *env, c *rdssock.Conn, b []byte, to netip.AddrPort, wait time.Duration) error {
	return sendWait(e.ctx, c, b, to, wait)
}

// sendWait sends b to `to`, allocating nothing in the common case. When
// the port is congested, the send buffer is full, or the connection is
// still being warmed up, it waits in the runtime poller for up to wait (0:
// until ctx ends): rdscat's sockets use Config.WaitCongested, so the
// kernel's congestion update wakes the send, as it wakes a blocking C
// socket, and the Conn counts such sends (CongestedSends). Without a
// bound the send simply waits; with one, a non-blocking try comes first,
// so that the bound's context is made only for a send that must wait.
func sendWait(ctx context.Context, c *rdssock.Conn, b []byte, to netip.AddrPort, wait time.Duration) error {
	wctx := ctx
	if wait > 0 {
		_, err := c.WriteMsgContext(ctx, b, nil, to, unix.MSG_DONTWAIT)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, rdssock.ErrCongested) && !errors.Is(err, unix.EAGAIN):
			return explain(err, to)
		}
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	for backoff := 100 * time.Microsecond; ; {
		_, err := c.WriteMsgContext(wctx, b, nil, to, 0)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return timeoutf("%v stayed congested, or the send buffer full, for %v: the receiver is not reading", to, wait)
		case !errors.Is(err, rdssock.ErrCongested):
			return explain(err, to)
		}
		// A socket without Config.WaitCongested: poll.
		select {
		case <-wctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}

// drain waits until the kernel has sent, and the peers' kernels have
// acknowledged, every message queued on c: closing an RDS socket discards
// what is still queued.
func drain(e *env, c *rdssock.Conn, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		pending, err := unacked(c)
		if err != nil {
			return fmt.Errorf("wait for queued messages: %w", err)
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return timeoutf("%d messages still unacknowledged after %v: is the peer reachable?", pending, wait)
		}
		select {
		case <-e.ctx.Done():
			return e.ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// unacked counts the messages from c's address that the kernel still
// holds: not yet sent, or sent and not acknowledged by the peer's kernel.
// It reads the send and retransmit queues; over RDS/IB only the send
// queue, since IB asks for an acknowledgement only every 8 messages or
// 16 KiB (rds_sysctl_max_unacked_packets and _bytes in net/rds/send.c), so
// a short burst stays on the retransmit queue although delivered.
func unacked(c *rdssock.Conn) (int, error) {
	local := c.LocalAddrPort()
	addr := local.Addr().WithZone("").Unmap() // the tables carry no zones
	queues := []rdssock.MessageQueue{rdssock.SendQueue, rdssock.RetransmitQueue}
	if tr, err := c.Transport(); err == nil && tr == rdssock.TransportIB {
		queues = queues[:1]
	}
	pending := 0
	for _, q := range queues {
		ms, err := c.Messages(q)
		if err != nil {
			return 0, err
		}
		for _, m := range ms {
			if m.Local.Addr() == addr && m.Local.Port() == local.Port() {
				pending++
			}
		}
	}
	return pending, nil
}
