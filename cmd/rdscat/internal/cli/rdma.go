//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

func init() {
	register(&command{
		name:    "rdma",
		summary: "RDMA demo: a client registers memory, a server WRITEs or READs it with immediate data",
		usage:   "[flags] CLIENT_ADDR:PORT SERVER_ADDR:PORT",
		help: `Run both ends of an RDS RDMA exchange in one process and narrate it. The
client registers a buffer and sends its cookie to the server in an ordinary
RDS message; the server issues an RDMA WRITE into that buffer (or with -read
an RDMA READ from it) with immediate data: a message the kernel delivers to
the client only after the transfer is complete. The server waits for the
kernel's completion notice of its own operation. Both sides check the bytes.

Both addresses must belong to an RDMA device (InfiniBand, RoCE or Soft-RoCE):
RDMA on RDS/TCP and loopback fails with "operation not supported". RDS/IB
works only in the initial network namespace. Keep -size modest on Soft-RoCE.

Examples:
  rdscat rdma 10.22.0.1:4100 10.22.0.2:4100
  rdscat rdma -read -size 16k 10.22.0.1:4100 10.22.0.2:4100`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			o := &rdmaOpts{size: 4096}
			fs.Var(&o.size, "size", "`BYTES` to transfer (up to 1m; keep it modest on Soft-RoCE)")
			fs.BoolVar(&o.read, "read", false, "RDMA READ from the client's buffer instead of WRITE into it")
			fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up on any step after this long")
			return o.run
		},
	})
}

type rdmaOpts struct {
	size    sizeValue
	read    bool
	timeout time.Duration
}

func (o *rdmaOpts) run(e *env, args []string) error {
	if len(args) != 2 {
		return usagef("want CLIENT_ADDR:PORT and SERVER_ADDR:PORT, got %d arguments", len(args))
	}
	cAddr, err := parseAddrPort("client address", args[0])
	if err != nil {
		return err
	}
	sAddr, err := parseAddrPort("server address", args[1])
	if err != nil {
		return err
	}
	if o.size < 1 || o.size > rdmaops.MaxTransfer {
		return usagef("-size %d: want 1 to %d bytes", o.size, rdmaops.MaxTransfer)
	}
	if o.timeout <= 0 {
		return usagef("-timeout must be positive")
	}
	if cAddr.Port() == 0 || sAddr.Port() == 0 || cAddr == sAddr {
		return usagef("give two different addresses with non-zero ports")
	}
	ctx, cancel := context.WithTimeout(e.ctx, o.timeout)
	defer cancel()
	say := func(format string, args ...any) { fmt.Fprintf(e.stdout, format+"\n", args...) }

	cfg := &rdssock.Config{SendBuffer: bufferFor(int(o.size)), ReceiveBuffer: 1 << 20, ForceBuffers: isRoot()}
	cs, err := rdssock.Listen(cAddr, cfg)
	if err != nil {
		return explain(err, cAddr)
	}
	defer cs.Close()
	ss, err := rdssock.Listen(sAddr, cfg)
	if err != nil {
		return explain(err, sAddr)
	}
	defer ss.Close()
	if tr, _ := cs.Transport(); tr != rdssock.TransportIB {
		return fmt.Errorf("%v uses the %v transport: RDMA needs InfiniBand/RoCE: %w (put the address on an RDMA device, e.g. a Soft-RoCE rxe link)", cAddr, tr, rdssock.ErrTransportUnavailable)
	}
	say("rdma: client %v, server %v (transport infiniband)", cAddr, sAddr)
	if ok, err := warmUp(e, nil, cs, sAddr.Addr(), 5*time.Second); err != nil || !ok {
		return fmt.Errorf("no RDS ping reply from %v: the IB connection did not come up (%v)", sAddr.Addr(), err)
	}

	client := rdmaops.New(cs, barrier.New(nil), nil)
	server := rdmaops.New(ss, barrier.New(nil), nil)
	n := int(o.size)
	cRegion, err := rdmaops.NewRegion(n)
	if err != nil {
		return err
	}
	defer cRegion.Close()
	sRegion, err := rdmaops.NewRegion(n)
	if err != nil {
		return err
	}
	defer sRegion.Close()
	fillPattern(sRegion.Bytes()[:n], 0x5a)
	fillPattern(cRegion.Bytes()[:n], 0xc3)

	// The client registers its buffer; the cookie travels with the request.
	verb, flags := "WRITE into", cmsg.FlagReadWrite
	if o.read {
		verb, flags = "READ from", 0
	}
	req := fmt.Sprintf("please RDMA %s my %d bytes", verb, n)
	mr, err := client.Register(ctx, cRegion.Span(0, n), flags|cmsg.FlagUseOnce|cmsg.FlagInvalidate, sAddr, []byte(req))
	if err != nil {
		return fmt.Errorf("client: register %d bytes: %w", n, err)
	}
	say("client: registered %d bytes (cookie %v, %v), sent %q", n, mr.Cookie(), client.RegMode(), req)

	// The server reads the request and its cookie.
	buf := make([]byte, 4096)
	var cookie cmsg.Cookie
	for {
		m, err := server.ReadMsg(ctx, buf, nil)
		if err != nil {
			return fmt.Errorf("server: waiting for the request: %w", err)
		}
		if m.HasDest && m.From == cAddr {
			cookie = m.Dest
			say("server: request %q from %v with cookie %v", buf[:m.N], m.From, cookie)
			break
		}
	}

	imm := fmt.Sprintf("done: %d bytes", n)
	start := time.Now()
	var tok barrier.Token
	if o.read {
		tok, err = server.Read(ctx, cAddr, cookie, 0, sRegion.Span(0, n), []byte(imm))
	} else {
		tok, err = server.Write(ctx, cAddr, cookie, 0, sRegion.Span(0, n), []byte(imm))
	}
	op := map[bool]string{false: "WRITE", true: "READ"}[o.read]
	if err != nil {
		return fmt.Errorf("server: RDMA %s: %w", op, err)
	}
	say("server: RDMA %s of %d bytes queued with immediate data %q", op, n, imm)
	st, err := server.Wait(ctx, tok)
	if err != nil {
		return timeoutf("server: no completion notice for the RDMA %s: %v", op, err)
	}
	say("server: completion notice: %v after %s ms", st, fmtMS(time.Since(start)))
	if st.Err() != nil {
		return fmt.Errorf("server: RDMA %s failed: %w", op, st.Err())
	}

	// The client gets the immediate data only after the transfer.
	for {
		m, err := client.ReadMsg(ctx, buf, nil)
		if err != nil {
			return fmt.Errorf("client: waiting for the immediate data: %w", err)
		}
		if m.From == sAddr && m.N > 0 {
			say("client: immediate data from %v: %q", m.From, buf[:m.N])
			break
		}
	}
	want := make([]byte, n)
	if o.read {
		fillPattern(want, 0xc3)
		if !bytes.Equal(sRegion.Bytes()[:n], want) {
			return errors.New("server: the bytes read differ from the client's buffer")
		}
		say("server: its buffer now holds the client's %d bytes (verified)", n)
	} else {
		fillPattern(want, 0x5a)
		if !bytes.Equal(cRegion.Bytes()[:n], want) {
			return errors.New("client: the buffer does not hold the bytes the server wrote")
		}
		say("client: its buffer holds the server's %d bytes (verified)", n)
	}
	_ = mr.Free()
	return nil
}

// fillPattern writes a position-dependent pattern seeded by seed.
func fillPattern(b []byte, seed byte) {
	for i := range b {
		b[i] = seed ^ byte(i) ^ byte(i>>8)
	}
}
