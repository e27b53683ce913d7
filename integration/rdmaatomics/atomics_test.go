//go:build integration

package rdmaatomics

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// TestAtomicsWedgeRxe: without the opt-in an atomic is refused; with it,
// the kernel accepts the atomic but rxe never completes it, the deadline
// fires, and later messages on that connection are not delivered.
func TestAtomicsWedgeRxe(t *testing.T) {
	vmtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := &rdssock.Config{TOS: 5} // a connection of its own
	ssock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr1, 4500), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ssock.Close()
	csock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr2, 4501), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer csock.Close()

	client := rdmaops.New(csock, nil, nil)
	region, err := rdmaops.NewRegion(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Register(ctx, region.Span(0, 4096), cmsg.FlagReadWrite, ssock.LocalAddrPort(), []byte("word")); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 256), make([]byte, 1024)
	ssock.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, oobn, _, _, err := ssock.ReadMsg(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	refused := rdmaops.New(ssock, nil, nil)
	ck, ok, _, err := refused.HandleControl(oob[:oobn])
	if err != nil || !ok {
		t.Fatalf("registration message without a cookie: %v", err)
	}

	sreg, _ := rdmaops.NewRegion(4096)
	a := &rdmaops.Atomic{Kind: rdmaops.FetchAdd, Remote: ck, Result: sreg.Span(0, 8), Add: 1, Deadline: time.Now().Add(3 * time.Second)}
	if _, err := refused.DoAtomic(ctx, csock.LocalAddrPort(), a); !errors.Is(err, rdmaops.ErrAtomicsDisabled) {
		t.Fatalf("atomic without the opt-in: %v", err)
	}

	tr := barrier.New(nil)
	defer tr.Close()
	server := rdmaops.New(ssock, tr, &rdmaops.Options{AllowAtomics: true})
	go func() {
		for {
			ssock.SetReadDeadline(time.Time{})
			_, oobn, _, _, err := ssock.ReadMsg(buf, oob)
			if err != nil {
				return
			}
			server.HandleControl(oob[:oobn])
		}
	}()
	start := time.Now()
	tok, err := server.DoAtomic(ctx, csock.LocalAddrPort(), a)
	if err != nil {
		t.Fatalf("sendmsg of the atomic: %v (the kernel used to accept it)", err)
	}
	st, err := tr.Wait(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	word := region.Bytes()[0]
	t.Logf("fetch-add over rxe: status %v after %v; remote word now %d", st, time.Since(start), word)
	if st == barrier.Success {
		t.Fatalf("the atomic succeeded over rxe: the wedge documented in rdmaops is gone on %s", vmtest.KernelRelease())
	}
	if st != barrier.TimedOut {
		t.Logf("the atomic failed with %v rather than never completing", st)
	}
	// Is the connection wedged? A plain message server → client.
	if _, err := ssock.WriteMsg([]byte("after atomic"), nil, csock.LocalAddrPort()); err != nil {
		t.Fatalf("send after the atomic: %v", err)
	}
	csock.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		n, _, _, _, err := csock.ReadMsg(buf, oob)
		if err != nil {
			t.Logf("message after the atomic not delivered within 3s (%v): the connection is wedged", err)
			break
		}
		if string(buf[:n]) == "after atomic" {
			t.Logf("message after the atomic was delivered: the connection survived")
			break
		}
	}
}
