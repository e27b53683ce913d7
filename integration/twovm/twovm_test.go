//go:build integration

package twovm

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/internal/rawrds"
	"github.com/go-rds/rds/integration/vmtest"
)

// port is the fixed RDS port both VMs bind, so each knows where the other is.
const port = 4000

// TestIBBetweenVMs exchanges RDS/IB datagrams both ways between the two VMs.
//
// The VMs boot independently, so a message sent before the other side has
// bound its socket is dropped. Each side therefore repeats "hello" until it
// gets an "ack" for it, and acks every hello it receives; it is done once it
// has both received a hello (the other→this direction works) and an ack
// (this→other works), and keeps answering for a while afterwards so that
// the other side can finish too.
func TestIBBetweenVMs(t *testing.T) {
	vmtest.Require(t)
	if !vmtest.TwoVMs() {
		t.Fatal("this package must run in two VMs: its rdsvm.json asks for them; was it started through rdsvm?")
	}
	s, err := rawrds.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local := netip.AddrPortFrom(vmtest.LocalAddr4(), port)
	remote := netip.AddrPortFrom(vmtest.RemoteAddr4(), port)
	if _, err := s.Bind(local); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Transport()
	if err != nil {
		t.Fatal(err)
	}
	if tr != rawrds.TransIB {
		t.Fatalf("SO_RDS_TRANSPORT on %v = %d, want %d (IB over rxe)", local, tr, rawrds.TransIB)
	}

	me := vmtest.Role()
	hello := []byte("hello from " + me)
	ack := []byte("ack from " + me)
	var gotHello, gotAck bool
	deadline := time.Now().Add(2 * time.Minute)
	nextHello := time.Now()
	buf := make([]byte, 256)
	var doneAt time.Time
	for {
		now := time.Now()
		if !doneAt.IsZero() && now.Sub(doneAt) > 3*time.Second {
			break
		}
		if now.After(deadline) {
			t.Fatalf("%s: no exchange with %v within 2 minutes (hello received: %v, ack received: %v)",
				me, remote, gotHello, gotAck)
		}
		if !gotAck && !now.Before(nextHello) {
			if err := s.SendTo(hello, remote); err != nil {
				t.Logf("send hello: %v (retrying)", err)
			}
			nextHello = now.Add(500 * time.Millisecond)
		}
		n, src, err := s.RecvFrom(buf, 200*time.Millisecond)
		if err == rawrds.ErrTimeout {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if src != remote {
			t.Fatalf("message %q from %v, want from %v", buf[:n], src, remote)
		}
		msg := buf[:n]
		switch {
		case bytes.HasPrefix(msg, []byte("hello from ")):
			if want := "hello from " + other(me); string(msg) != want {
				t.Fatalf("got %q, want %q", msg, want)
			}
			gotHello = true
			if err := s.SendTo(ack, remote); err != nil {
				t.Fatalf("send ack: %v", err)
			}
		case bytes.HasPrefix(msg, []byte("ack from ")):
			if want := "ack from " + other(me); string(msg) != want {
				t.Fatalf("got %q, want %q", msg, want)
			}
			gotAck = true
		default:
			t.Fatalf("unexpected message %q", msg)
		}
		if gotHello && gotAck && doneAt.IsZero() {
			doneAt = time.Now()
			t.Logf("%s: RDS/IB %v <-> %v works both ways", me, local, remote)
		}
	}
}

func other(role string) string {
	if role == vmtest.RolePeer {
		return vmtest.RoleMain
	}
	return vmtest.RolePeer
}
