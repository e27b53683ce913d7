//go:build linux

package rdmaops_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// A client registers a buffer; the cookie travels to the server with the
// message "read into this".
func ExampleConn_Register() {
	ctx := context.Background()
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	c := rdmaops.New(sock, nil, nil)

	region, err := rdmaops.NewRegion(16 << 10)
	if err != nil {
		log.Fatal(err)
	}
	mr, err := c.Register(ctx, region.Span(0, 16<<10), cmsg.FlagReadWrite, netip.MustParseAddrPort("10.0.0.2:4000"), []byte("read block 7 into this"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered with", c.RegMode(), "cookie", mr.Cookie())
}

// GetMR registers memory without sending anything; the cookie goes to the
// peer in a message of the application's own. On FRWR adapters (every
// current RoCE adapter, Soft-RoCE) the kernel refuses: use Register.
func ExampleConn_GetMR() {
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	c := rdmaops.New(sock, nil, nil)
	region, err := rdmaops.NewRegion(16 << 10)
	if err != nil {
		log.Fatal(err)
	}
	peer := netip.MustParseAddrPort("10.0.0.2:4000")
	mr, err := c.GetMRForDest(peer, region.Span(0, 16<<10), cmsg.FlagReadWrite|cmsg.FlagInvalidate)
	if errors.Is(err, rdssock.ErrNotSupported) {
		fmt.Println("FRWR adapter: register with c.Register instead")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Free()
	fmt.Println("cookie", mr.Cookie())
}

// A server writes into a client's buffer with immediate data, then waits
// for the local completion before reusing its own buffer. ReadMsg returns
// the request with the client's cookie; Wait reads the completion notice
// in this goroutine. No receive loop, no retry loop.
func ExampleConn_Do() {
	ctx := context.Background()
	// WaitCongested: Do waits while the client's port is congested.
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.2:4000"), &rdssock.Config{WaitCongested: true})
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, nil, nil)
	defer c.Close()

	// The request carried the client's cookie.
	buf := make([]byte, 256)
	m, err := c.ReadMsg(ctx, buf, nil)
	if err != nil {
		log.Fatal(err)
	}
	if !m.HasDest {
		log.Fatalf("request %q without a cookie", buf[:m.N])
	}

	region, _ := rdmaops.NewRegion(16 << 10)
	copy(region.Bytes(), "block 7 contents")
	tok, err := c.Do(ctx, m.From, &rdmaops.Op{
		Write:   true,
		Remote:  m.Dest,
		Local:   []rdmaops.Span{region.Span(0, 8<<10), region.Span(8<<10, 8<<10)},
		Payload: []byte("block 7 is in your buffer"),
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.Wait(ctx, tok)
	fmt.Println("write", st, err) // the region may be reused now
}

// Keep depth operations in flight: wait for the oldest before reusing its
// buffer. Each Wait reads the notices that have arrived, its own and
// those of the operations after it.
func ExampleConn_Wait() {
	ctx := context.Background()
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.2:4000"), &rdssock.Config{WaitCongested: true})
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, nil, nil)
	defer c.Close()
	buf := make([]byte, 256)
	m, err := c.ReadMsg(ctx, buf, nil) // the peer's announcement
	if err != nil || !m.HasDest {
		log.Fatal("no cookie: ", err)
	}

	const depth, size = 16, 4096
	region, _ := rdmaops.NewRegion(depth * size)
	toks := make([]barrier.Token, depth)
	ops := make([]rdmaops.Op, depth)
	for i := range ops {
		ops[i] = rdmaops.Op{Write: true, Remote: m.Dest, RemoteOffset: uint64(i * size), Local: []rdmaops.Span{region.Span(i*size, size)}}
	}
	for n := 0; n < 100000; n++ {
		i := n % depth
		if n >= depth {
			if st, err := c.Wait(ctx, toks[i]); err != nil || st != barrier.Success {
				log.Fatal(st, err)
			}
		}
		// ... fill region.Span(i*size, size) ...
		if toks[i], err = c.Do(ctx, m.From, &ops[i]); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.WaitAll(ctx, c.Tracker().Last()); err != nil {
		log.Fatal(err)
	}
}

// The receiving side: ReadMsg returns the messages with data and consumes
// the completion notices of this socket's own operations.
func ExampleConn_ReadMsg() {
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, nil, nil)
	defer c.Close()
	buf := make([]byte, 4096)
	for {
		m, err := c.ReadMsg(context.Background(), buf, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%v: %q\n", m.From, buf[:m.N])
	}
}

// A pool lends pre-registered buffers and takes them back without a copy
// or a registration.
func ExamplePool() {
	ctx := context.Background()
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, nil, nil)
	server := netip.MustParseAddrPort("10.0.0.2:4000")
	pool, err := rdmaops.NewPool(ctx, c.Registrar(server, []byte("hello")), 8, 16<<10, cmsg.FlagReadWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	b, _ := pool.Get(ctx) // InTransmission: send b.Cookie() and b.Index() in a request
	// ... the reply names b.Index(): the data is in place.
	b = pool.Buffer(b.Index())
	b.Landed()
	fmt.Println(len(b.Bytes()))
	b.Release()
}

// Atomics are refused unless allowed: on Soft-RoCE they wedge the connection.
func ExampleConn_DoAtomic() {
	c := rdmaops.New(nil, nil, nil)
	region, _ := rdmaops.NewRegion(4096)
	_, err := c.DoAtomic(context.Background(), netip.AddrPort{}, &rdmaops.Atomic{Kind: rdmaops.FetchAdd, Result: region.Span(0, 8), Add: 1})
	fmt.Println(err == rdmaops.ErrAtomicsDisabled)
	// Output: true
}

// When a transfer into a lent buffer failed or its reply never came, the
// peer may still write with the old cookie, and the kernel may still let
// it: revoke the buffer, and put it back only once the peer confirms.
func ExampleBuffer_Revoke() {
	ctx := context.Background()
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, nil, nil)
	defer c.Close()
	server := netip.MustParseAddrPort("10.0.0.2:4000")
	pool, err := rdmaops.NewPool(ctx, c.Registrar(server, nil), 8, 4096, cmsg.FlagReadWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	b, _ := pool.Get(ctx)
	// ... the request naming b.Cookie() timed out:
	b.Revoke() // key freed, memory out of circulation
	// ... later the peer answers "done with that cookie":
	if err := b.Confirm(); err != nil { // new key, Available again
		log.Fatal(err)
	}
}

// A peer stopped answering: its operations time out, and their memory
// stays out of use until the kernel gives it back. Cancel drops what is
// queued for the peer; the kernel's Canceled statuses, read by the next
// Wait or ReadMsg, release the timed-out operations.
func ExampleConn_Cancel() {
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.2:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, barrier.New(&barrier.Config{Timeout: time.Second}), nil)
	defer c.Close()
	peer := netip.MustParseAddrPort("10.0.0.1:4000")
	// ... c.Do(ctx, peer, op) timed out: Wait returned barrier.TimedOut ...
	if err := c.Cancel(peer); err != nil {
		log.Print(err)
	}
	fmt.Println("quarantined:", c.Tracker().Stats().Quarantined)
}

// Close resolves every operation still in flight (status canceled), since
// the kernel discards their notices with the socket.
func ExampleConn_Close() {
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.1:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	c := rdmaops.New(sock, nil, nil)
	// ... c.Do(...) issued operations ...
	if err := c.Close(); err != nil {
		log.Print(err)
	}
	fmt.Println(c.Tracker().Outstanding())
}
