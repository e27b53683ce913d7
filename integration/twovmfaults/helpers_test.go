//go:build integration

package twovmfaults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// helperEnv makes the test binary, started again by the test itself, run
// one netlink request and exit instead of running tests (see TestMain).
const helperEnv = "TWOVMFAULTS_HELPER"

// TestMain lets a test run a request that may block in the kernel in a
// child process: a child stuck in uninterruptible sleep does not keep the
// test binary from exiting.
func TestMain(m *testing.M) {
	if req := os.Getenv(helperEnv); req != "" {
		os.Exit(runHelper(req))
	}
	os.Exit(m.Run())
}

// runHelper performs req ("delete-rxe:NAME") and returns the exit code.
func runHelper(req string) int {
	name, ok := strings.CutPrefix(req, "delete-rxe:")
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper request %q\n", req)
		return 2
	}
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close()
	if err := h.DeleteRxe(name); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// deleteRxeChild deletes the rxe device name from a child process and
// waits at most limit for it. It returns how long the deletion took and
// its error; hung is true when the child was still inside the kernel at
// the limit (it is abandoned then: killing a task in uninterruptible
// sleep has no effect).
func deleteRxeChild(name string, limit time.Duration) (took time.Duration, hung bool, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, false, err
	}
	var out bytes.Buffer
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=delete-rxe:"+name)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return time.Since(start), false, fmt.Errorf("%v: %s", err, strings.TrimSpace(out.String()))
		}
		return time.Since(start), false, nil
	case <-time.After(limit):
		return limit, true, fmt.Errorf("rdma link delete %s still running after %v", name, limit)
	}
}

const port = 4300

type msg struct {
	data    []byte
	dest    cmsg.Cookie
	hasDest bool
}

type end struct {
	sock *rdssock.Conn
	c    *rdmaops.Conn
	msgs chan msg
	done chan struct{}
}

// askKey asks the owner at peer for its key ("key?") until one that dead
// does not hold arrives or limit passes.
func (e *end) askKey(ctx context.Context, peer netip.AddrPort, dead map[cmsg.Cookie]bool, limit time.Duration) (cmsg.Cookie, bool) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		e.sock.WriteMsgContext(sctx, []byte("key?"), nil, peer, 0)
		scancel()
		select {
		case m := <-e.msgs:
			if m.hasDest && !dead[m.dest] {
				return m.dest, true
			}
		case <-time.After(time.Second):
		}
	}
	return 0, false
}

func newEnd(t *testing.T, tr *barrier.Tracker, p uint16) *end {
	t.Helper()
	return newEndOpts(t, tr, p, nil)
}

func newEndOpts(t *testing.T, tr *barrier.Tracker, p uint16, opts *rdmaops.Options) *end {
	t.Helper()
	sock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.LocalAddr4(), p), nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := sock.Transport(); err != nil || k != rdssock.TransportIB {
		t.Fatalf("transport %v, %v; want IB", k, err)
	}
	e := &end{sock: sock, c: rdmaops.New(sock, tr, opts), msgs: make(chan msg, 4096), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		buf := make([]byte, 4096)
		for {
			m, err := e.c.ReadMsg(context.Background(), buf, nil)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if m.N > 0 || m.HasDest {
				select {
				case e.msgs <- msg{data: bytes.Clone(buf[:m.N]), dest: m.Dest, hasDest: m.HasDest}:
				default:
				}
			}
		}
	}()
	return e
}

func (e *end) close() {
	e.c.Close()
	<-e.done
}

// closeWithin closes the end in another goroutine and waits at most limit
// for the close and the reader to finish. ok is false if they did not: the
// close is then stuck in the kernel, and the goroutine is abandoned.
func (e *end) closeWithin(limit time.Duration) (took time.Duration, ok bool) {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		e.close()
		close(done)
	}()
	select {
	case <-done:
		return time.Since(start), true
	case <-time.After(limit):
		return limit, false
	}
}

// goroutines returns the stacks of the goroutines that are inside
// package rdssock, rdmaops or barrier, or in a socket's poller: where a
// close that does not finish is waiting in user space.
func goroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "rdssock") || strings.Contains(g, "rdmaops") || strings.Contains(g, "barrier") || strings.Contains(g, "internal/poll") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// reliability logs the RELIABILITY line of one fault, in the ops format
// of package rdmafaults, from a histogram of final statuses.
func reliability(t *testing.T, fault string, h map[barrier.Status]int, ops int, outcome string) {
	t.Helper()
	other := h[barrier.OtherError] + h[barrier.NotSent] + h[barrier.Unknown] + h[barrier.Pending]
	t.Logf("RELIABILITY|%s|kernel=%s|ops=%d|success=%d|remote_error=%d|dropped=%d|canceled=%d|other=%d|timeout=%d|outcome=%s",
		fault, vmtest.KernelRelease(), ops, h[barrier.Success], h[barrier.RemoteError], h[barrier.Dropped], h[barrier.Canceled], other, h[barrier.TimedOut], strings.ReplaceAll(outcome, "|", "/"))
}

// owner registers memory for the main VM and serves until "bye". Every
// RDMA of the main VM carries immediate data, so the owner hears from it
// all the time; after silence of that length, or when the main VM says
// "rekey" (its operation with the key failed), it closes its socket and
// opens a new one, registering again on the next "key?". Measured in package rdmafaults: after a transport error
// the kernel's shutdown of the connection hangs, holding the RDS work
// queue, until the socket that registered memory over it is closed
// (rds_ib_conn_path_shutdown waits for the connection's registrations,
// i_fastreg_inuse_count, to drain); closing it is the owner's part of the
// recovery. Closes are bounded by closeLimit; a close that does not finish
// fails the test.
func owner(t *testing.T, ctx context.Context, main netip.AddrPort, p uint16, silence time.Duration) {
	const closeLimit = 20 * time.Second
	e := newEnd(t, nil, p)
	closed := false
	defer func() {
		if !closed {
			if _, ok := e.closeWithin(closeLimit); !ok {
				t.Errorf("peer: closing the socket did not finish within %v", closeLimit)
			}
		}
	}()
	ps := os.Getpagesize()
	region, err := rdmaops.NewRegion(16 * ps)
	if err != nil {
		t.Fatal(err)
	}
	var mr *rdmaops.MR
	last := time.Now()
	reopens := 0
	// reopen closes the socket, which drops its keys, and opens a new one;
	// it reports false if the close hung.
	reopen := func(why string) bool {
		start := time.Now()
		took, ok := e.closeWithin(closeLimit)
		if !ok {
			closed = true
			t.Errorf("peer: closing the socket (%s) did not finish within %v; blocked tasks: %s", why, closeLimit, strings.Join(dumpBlocked(), " / "))
			return false
		}
		if err := mr.Free(); err != nil {
			t.Errorf("peer: Free after Close: %v", err)
		}
		mr = nil
		e = newEnd(t, nil, p)
		reopens++
		t.Logf("peer: %s: socket closed in %v and reopened after %v", why, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		last = time.Now()
		return true
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-e.msgs:
			last = time.Now()
			switch s := string(m.data); {
			case s == "hello" || s == "key?":
				// (Re-)announce the key: after a reconnect the main VM asks again.
				if mr == nil {
					// A registration is one sendmsg that can block in the
					// kernel; if it does, show where.
					regStart := time.Now()
					wd := time.AfterFunc(10*time.Second, func() {
						t.Logf("peer: Register blocked for 10 s; blocked tasks: %s", strings.Join(dumpBlocked(), " / "))
					})
					mr, err = e.c.Register(ctx, region.Span(0, 16*ps), cmsg.FlagReadWrite, main, []byte("key"))
					if !wd.Stop() {
						t.Logf("peer: Register returned after %v: %v", time.Since(regStart).Round(time.Millisecond), err)
					}
					if err != nil {
						t.Logf("peer: Register: %v", err)
						mr = nil
						continue
					}
				} else if err := e.c.Announce(ctx, mr, main, []byte("key")); err != nil {
					t.Logf("peer: Announce: %v", err)
				}
			case s == "rekey":
				// The main VM's operation with the announced key failed
				// at this end (remote access error). A registration made
				// while its connection was being torn down yields a key
				// that never works (rds_ib_post_reg_frmr does not check
				// the completion of its registration request), so drop
				// the key with the socket and register anew on the next
				// "key?".
				if mr == nil {
					continue
				}
				if !reopen("the main VM reported a failed key") {
					return
				}
			case s == "bye":
				t.Logf("peer: bye; reopened the socket %d times", reopens)
				if mr != nil {
					mr.Free()
				}
				closed = true
				took, ok := e.closeWithin(closeLimit)
				if !ok {
					t.Errorf("peer: closing the socket did not finish within %v; blocked tasks: %s", closeLimit, strings.Join(dumpBlocked(), " / "))
					return
				}
				t.Logf("peer: socket closed in %v", took.Round(time.Millisecond))
				if err := region.Close(); err != nil {
					t.Errorf("peer: unmap: %v", err)
				}
				return
			}
		case <-tick.C:
			if reopens > 0 && time.Since(last) > 60*time.Second {
				// The main VM could not reach this socket again; it
				// reports that as its measurement.
				t.Logf("peer: nothing from the main VM for 60 s after reopening; done")
				region.Close()
				return
			}
			if mr != nil && time.Since(last) > silence {
				if !reopen(fmt.Sprintf("no message for %v", silence)) {
					return
				}
			}
		case <-ctx.Done():
			t.Fatal("peer: no bye from the main VM")
		}
	}
}

// dumpBlocked returns where the kernel waits (vmtest.DumpBlocked: the
// lines naming tasks and RDS, RDMA or rxe functions) and the stacks of
// this process's threads inside RDS or RDMA code.
func dumpBlocked() []string {
	out := vmtest.DumpBlocked(80, "task:", "rds", "rdma", "cma", "ib_", "rxe", "wait_for", "schedule_timeout")
	return append(out, taskStacks()...)
}

// taskStacks returns the kernel stacks of this process's threads that are
// inside RDS or RDMA code, with their scheduler state: sysrq w shows only
// uninterruptible sleeps.
func taskStacks() []string {
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return []string{"tasks: " + err.Error()}
	}
	var out []string
	for _, d := range dirs {
		stack, err := os.ReadFile("/proc/self/task/" + d.Name() + "/stack")
		if err != nil || !strings.Contains(string(stack), "rds") {
			continue
		}
		stat, _ := os.ReadFile("/proc/self/task/" + d.Name() + "/stat")
		state := ""
		if _, after, ok := strings.Cut(string(stat), ") "); ok && len(after) > 0 {
			state = after[:1]
		}
		out = append(out, fmt.Sprintf("thread %s state %s: %s", d.Name(), state, strings.Join(strings.Fields(string(stack)), " ")))
	}
	return out
}
