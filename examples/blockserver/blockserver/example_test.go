//go:build linux

package blockserver_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"os"
	"time"

	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/rdssock"
)

// A server exports a file of 8 KiB blocks on an address of an RDMA device
// until a client says goodbye, then reports what it refused.
func ExampleNewServer() {
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.22.0.2:4100"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sock.Close()
	f, err := os.OpenFile("blocks.img", os.O_RDWR, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	srv, err := blockserver.NewServer(sock, f, &blockserver.ServerConfig{BlockSize: 8 << 10})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if _, err := srv.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
	st := srv.Stats()
	fmt.Printf("%d reads, %d writes, %d refused (%d bad cookies)\n", st.Reads, st.Writes, st.Errors, st.BadCookies)
}

// A client reads a block: the server RDMA-writes it into a buffer of the
// client's pool, where the callback consumes it.
func ExampleDial() {
	sock, err := rdssock.Listen(netip.MustParseAddrPort("10.22.0.1:4101"), nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := blockserver.Dial(ctx, sock, netip.MustParseAddrPort("10.22.0.2:4100"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	err = cl.ReadBlock(ctx, 0, func(data []byte) error {
		fmt.Printf("block 0: %d bytes\n", len(data))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Content builds the same test file on both sides from a seed.
func ExampleContent() {
	a, b := blockserver.Content(7, 1<<16), blockserver.Content(7, 1<<16)
	fmt.Println(len(a), string(a) == string(b))
	// Output: 65536 true
}
