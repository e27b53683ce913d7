//go:build integration

package twovmrdma

import (
	"context"
	"crypto/sha256"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

const (
	port = 4100
	seed = 11
	size = 1 << 20
	ops  = 1000
)

// TestBlockServerAcrossVMs: the peer VM serves a 1 MiB file in 8 KiB
// blocks; the main VM makes 1,000 random block reads and writes by RDMA and
// compares checksums at the end, on both sides.
func TestBlockServerAcrossVMs(t *testing.T) {
	vmtest.Require(t)
	if !vmtest.TwoVMs() {
		t.Fatal("this package must run in two VMs: its rdsvm.json asks for them; was it started through rdsvm?")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	local := netip.AddrPortFrom(vmtest.LocalAddr4(), port)
	remote := netip.AddrPortFrom(vmtest.RemoteAddr4(), port)
	sock, err := rdssock.Listen(local, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if tr, err := sock.Transport(); err != nil || tr != rdssock.TransportIB {
		t.Fatalf("transport %v, %v; want IB", tr, err)
	}
	if vmtest.Role() == vmtest.RolePeer {
		serve(t, ctx, sock)
		return
	}
	client(t, ctx, sock, remote)
}

func serve(t *testing.T, ctx context.Context, sock *rdssock.Conn) {
	path := t.TempDir() + "/blocks.img"
	if err := os.WriteFile(path, blockserver.Content(seed, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv, err := blockserver.NewServer(sock, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	clientSum, err := srv.Serve(ctx)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256.Sum256(disk); got != clientSum {
		t.Fatalf("file SHA-256 %x, the client's model %x", got, clientSum)
	}
	st := srv.Stats()
	if st.Reads+st.Writes != ops || st.Errors != 0 || st.Syncs != st.Writes {
		t.Fatalf("server stats %+v, want %d ops without errors", st, ops)
	}
	t.Logf("peer served %d reads and %d writes (%d fsyncs) in %v; file SHA-256 %x matches the client's", st.Reads, st.Writes, st.Syncs, time.Since(start), clientSum)
}

func client(t *testing.T, ctx context.Context, sock *rdssock.Conn, server netip.AddrPort) {
	start := time.Now()
	cl, err := blockserver.Dial(ctx, sock, server, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	warm := cl.Conn().Registrations()
	t.Logf("connected to %v after %v: %d blocks of %d bytes, %d registrations (%v)", server, time.Since(start), cl.Blocks(), cl.BlockSize(), warm, cl.Conn().RegMode())
	model := blockserver.Content(seed, size)
	res, err := blockserver.Workload(ctx, cl, model, ops, 4, seed)
	if err != nil {
		t.Fatalf("workload after %d reads and %d writes: %v", res.Reads, res.Writes, err)
	}
	sum, err := cl.Sum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum != res.Sum {
		t.Fatalf("server's file SHA-256 %x, client's model %x", sum, res.Sum)
	}
	if got := cl.Conn().Registrations(); got != warm {
		t.Fatalf("%d registrations during the workload", got-warm)
	}
	if err := cl.Bye(ctx, res.Sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("main: %d reads, %d writes (%d KiB) across VMs in %v (%.0f ops/s); SHA-256 %x equal on both sides; pool %+v",
		res.Reads, res.Writes, res.Bytes>>10, res.Duration, float64(ops)/res.Duration.Seconds(), sum, cl.Pool().Stats())
	time.Sleep(500 * time.Millisecond) // let the goodbye reach the peer before the socket closes
}
