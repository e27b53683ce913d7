//go:build integration

package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// bogusWrite tears down the RDS/IB connection from local's address to
// peer's: an RDMA WRITE with a key the peer never issued, from a socket
// of its own on the same addresses and TOS.
func bogusWrite(t *testing.T, local netip.Addr, peer netip.AddrPort) {
	s, err := rdssock.Listen(netip.AddrPortFrom(local, 0), nil)
	if err != nil {
		t.Errorf("fault socket: %v", err)
		return
	}
	c := rdmaops.New(s, nil, nil)
	defer c.Close()
	r, _ := rdmaops.NewRegion(4096)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := c.Do(ctx, peer, &rdmaops.Op{Write: true, Remote: cmsg.MakeCookie(0x5a5a5a, 0), Local: []rdmaops.Span{r.Span(0, 64)}})
	if err != nil {
		t.Errorf("bogus write: %v", err)
		return
	}
	st, err := c.Wait(ctx, tok)
	t.Logf("bogus write: %v %v", st, err)
}

// resetStallC runs the C reference (rdstest builds it into testdata/; by
// hand: gcc -O2 -static -o examples/rdmawrite/testdata/resetstall-c
// integration/internal/bench/cbaseline/resetstall.c) and checks what it saw.
func resetStallC(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("testdata", "resetstall-c"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the C reference is missing (%v): rdstest builds it; by hand: gcc -O2 -static -o examples/rdmawrite/testdata/resetstall-c integration/internal/bench/cbaseline/resetstall.c", err)
	}
	for _, flags := range []string{"0", "4"} { // RDS_FREE_MR without and with RDS_RDMA_INVALIDATE
		p, _ := ports()
		ports() // the program uses four ports from p on
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		marks, resets := len(vmtest.KernelLog("disconnecting and reconnecting")), connResets(t)
		out, err := exec.CommandContext(ctx, bin, vmtest.IBAddr1.String(), vmtest.IBAddr2.String(), strconv.Itoa(int(p.Port())), "5000", flags).CombinedOutput()
		cancel()
		line := strings.TrimSpace(string(out))
		t.Log(line)
		if err != nil {
			t.Fatalf("resetstall-c: %v", err)
		}
		drops := vmtest.KernelLog("disconnecting and reconnecting")
		n := connResets(t) - resets
		t.Logf("connection paths reset: %d; drops logged: %q", n, drops[min(marks, len(drops)):])
		if n == 0 {
			t.Errorf("no RDS connection was reset (conn_reset did not move) by the C program's fault")
		}
		if field(t, line, "baseline_success") != 16 || field(t, line, "baseline_msgs") != 16 {
			t.Fatalf("the C program's 16 READs without a fault did not all succeed and deliver: %s", line)
		}
		if field(t, line, "held_status") != 0 || field(t, line, "held_msgs") != 0 {
			t.Errorf("the kernel let statuses or messages through while the registration lived: the BUG note of package rdmaops is out of date for %s: %s", vmtest.KernelRelease(), line)
		}
		if field(t, line, "freed_status")+field(t, line, "closed_status") != 16 {
			t.Errorf("not every operation got a status by 20 s after the passive socket was closed: %s", line)
		}
	}
}

// connResets returns the kernel's conn_reset counter: how many RDS
// connection paths finished shutting down (the kernel does not always log
// the drop: on 7.2 it did not, once each way).
func connResets(t *testing.T) uint64 {
	s, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr2, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Name == "conn_reset" {
			return c.Value
		}
	}
	t.Fatal("the kernel has no RDS counter conn_reset")
	return 0
}

// txSeq returns the next send sequence number of the RDS/IB connection
// from IBAddr2 to IBAddr1 (TOS 0), which the example's active side uses,
// or 0 when there is none yet.
func txSeq(t *testing.T) uint64 {
	s, err := rdssock.Listen(netip.AddrPortFrom(vmtest.IBAddr2, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conns, err := s.Connections()
	if err != nil {
		t.Fatal(err)
	}
	for _, cn := range conns {
		if cn.Local == vmtest.IBAddr2 && cn.Remote == vmtest.IBAddr1 && cn.TOS == 0 {
			return cn.NextTxSeq
		}
	}
	return 0
}

// sentMore waits until that connection's sequence number passed base+n.
func sentMore(t *testing.T, base, n uint64, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if txSeq(t) >= base+n {
			return true
		}
	}
	return false
}

// TestIntegrationExampleReset runs the example, READ and WRITE at depth 16,
// and tears its RDS/IB connection down in the middle of the run: a socket
// of its own on the active side's address issues an RDMA WRITE with a key
// the passive side never issued, whose remote access error makes the
// kernel drop the connection ("disconnecting and reconnecting"), as the
// transport retry error of a starved Soft-RoCE did in CI. The run must
// still complete: every operation verified, the immediate data of each
// exactly once at the passive side, at least one recovery on both sides.
//
// First, in the same VM, the plain C reference integration/internal/bench/cbaseline/resetstall.c
// shows the kernel behaviour the example's recovery rests on (see the BUG
// note of package rdmaops): after the same fault, while the passive
// socket's registration lives, neither a status of the active side's
// operations nor their immediate data comes through for 5 s; once the
// registration is freed (RDS_FREE_MR, with and without
// RDS_RDMA_INVALIDATE, then a flush), or at the latest once the passive
// socket is closed, every operation gets a status.
func TestIntegrationExampleReset(t *testing.T) {
	vmtest.Require(t)
	t.Run("c-reference", resetStallC)
	for _, op := range []string{"read", "write"} {
		t.Run(op, func(t *testing.T) {
			const ops = 10000 // the fault comes after 2000
			p, a := ports()
			base := txSeq(t)
			common := []string{"-op", op, "-depth", "16", "-size", "4096", "-ops", strconv.Itoa(ops), "-timeout", "2m"}
			var pout, aout bytes.Buffer
			var perr, aerr error
			var wg sync.WaitGroup
			wg.Add(2)
			start := time.Now()
			var pend, aend time.Duration
			go func() {
				defer wg.Done()
				perr = run(context.Background(), append([]string{"-role", "passive", "-local", p.String(), "-peer", a.String()}, common...), &pout)
				pend = time.Since(start)
			}()
			go func() {
				defer wg.Done()
				aerr = run(context.Background(), append([]string{"-role", "active", "-local", a.String(), "-peer", p.String()}, common...), &aout)
				aend = time.Since(start)
			}()
			marks, resets := len(vmtest.KernelLog("disconnecting and reconnecting")), connResets(t)
			// The fault comes once the active side's connection carried
			// 2000 more messages: well into the run, far from its end.
			if !sentMore(t, base, 2000, time.Minute) {
				t.Errorf("the run did not get going: no 2000 messages in a minute")
			}
			faultAt := time.Since(start)
			bogusWrite(t, vmtest.IBAddr2, netip.AddrPortFrom(vmtest.IBAddr1, p.Port()+100))
			stall := time.AfterFunc(30*time.Second, func() {
				t.Logf("30 s after the fault: blocked tasks:\n%s", strings.Join(vmtest.DumpBlocked(0), "\n"))
			})
			wg.Wait()
			stall.Stop()
			drops := vmtest.KernelLog("disconnecting and reconnecting")
			n := connResets(t) - resets
			t.Logf("fault at %v; passive ended at %v, active at %v; connection paths reset: %d; drops logged: %q", faultAt, pend, aend, n, drops[min(marks, len(drops)):])
			if perr != nil || aerr != nil {
				t.Fatalf("passive: %v (%q), active: %v (%q)", perr, pout.String(), aerr, aout.String())
			}
			al, pl := strings.TrimSpace(aout.String()), strings.TrimSpace(pout.String())
			t.Log(al)
			t.Log(pl)
			if n == 0 {
				t.Errorf("no RDS connection was reset (conn_reset did not move) by the fault")
			}
			if field(t, al, "ops") != ops || field(t, al, "failed") != 0 || field(t, al, "verified") != ops {
				t.Errorf("active side: %s; want %d operations, all verified", al, ops)
			}
			if field(t, pl, "immediate") != ops || field(t, pl, "bad") != 0 || field(t, pl, "gap") != 0 {
				t.Errorf("passive side: %s; want %d immediate data messages in order, none bad", pl, ops)
			}
			if op == "write" && field(t, pl, "verified") != ops {
				t.Errorf("passive side: %s; want every WRITE verified in place", pl)
			}
			if field(t, al, "recoveries") < 1 || field(t, pl, "resets") < 1 {
				t.Errorf("the fault did not reach the run (active: %s; passive: %s): it ended before the fault at %v, or the connection did not drop", al, pl, faultAt)
			}
		})
	}
}
