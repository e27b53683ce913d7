//go:build linux

package rdmaops_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"

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

// A server writes into a client's buffer with immediate data, then waits
// for the local completion before reusing its own buffer.
func ExampleConn_Do() {
	ctx := context.Background()
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.0.0.2:4000"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	c := rdmaops.New(sock, barrier.New(nil), nil)
	client := netip.MustParseAddrPort("10.0.0.1:4000")

	// The request carried the client's cookie.
	buf, oob := make([]byte, 256), make([]byte, 1024)
	_, oobn, _, _, err := sock.ReadMsg(buf, oob)
	if err != nil {
		log.Fatal(err)
	}
	cookie, ok, _, err := c.HandleControl(oob[:oobn])
	if err != nil || !ok {
		log.Fatal("request without a cookie")
	}

	region, _ := rdmaops.NewRegion(16 << 10)
	copy(region.Bytes(), "block 7 contents")
	tok, err := c.Do(ctx, client, &rdmaops.Op{
		Write:   true,
		Remote:  cookie,
		Local:   []rdmaops.Span{region.Span(0, 8<<10), region.Span(8<<10, 8<<10)},
		Payload: []byte("block 7 is in your buffer"),
	})
	if err != nil {
		log.Fatal(err)
	}
	// Completion notices arrive on this socket; a receive loop must feed
	// them to the tracker.
	go func() {
		for {
			_, oobn, _, _, err := sock.ReadMsg(buf, oob)
			if err != nil {
				return
			}
			c.HandleControl(oob[:oobn])
		}
	}()
	st, err := c.Tracker().Wait(ctx, tok)
	fmt.Println("write", st, err)
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
