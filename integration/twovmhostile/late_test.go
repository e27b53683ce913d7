//go:build integration

package twovmhostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/examples/blockserver/blockserver"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

const (
	serverPort  = 4400
	slowPort    = 4401
	localPort   = 4402
	controlPort = 4409
	bsize       = 4096
	nblocks     = 16
	seed        = 21
	writes      = 4
	delay       = 300 * time.Millisecond
	deadline    = 100 * time.Millisecond
)

// control is a socket for the test's own hello/go/bye messages.
type control struct {
	sock *rdssock.Conn
	to   netip.AddrPort
	msgs chan string
}

func newControl(t *testing.T) *control {
	t.Helper()
	sock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.LocalAddr4(), controlPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &control{sock: sock, to: netip.AddrPortFrom(vmtest.RemoteAddr4(), controlPort), msgs: make(chan string, 16)}
	go func() {
		buf, oob := make([]byte, 1024), make([]byte, cmsg.MaxReceiveSpace)
		for {
			n, _, _, _, err := sock.ReadMsg(buf, oob)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if n > 0 {
				select {
				case c.msgs <- string(buf[:n]):
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { sock.Close() })
	return c
}

func (c *control) send(ctx context.Context, s string) {
	c.sock.WriteMsgContext(ctx, []byte(s), nil, c.to, 0)
}

// await repeats say (if not empty) every 500 ms until a message with the
// prefix want arrives.
func (c *control) await(t *testing.T, ctx context.Context, say, want string) string {
	t.Helper()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if say != "" {
			c.send(ctx, say)
		}
		select {
		case m := <-c.msgs:
			if strings.HasPrefix(m, want) {
				return m
			}
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no %q from the other VM", want)
		}
	}
}

// TestLateRDMANeverLandsInReusedSlot: the server (main VM, one slot,
// 100 ms RDMA deadline) serves a slow client in the peer VM whose
// transfers a 300 ms netem delay on the main VM's link makes complete
// late, and a client in the main VM (unaffected: Soft-RoCE loops local
// traffic back) that reads blocks all along. Each of the slow client's
// writes is answered "held" at its deadline; the slot is not reused, and
// the local client not served, until the kernel's late status frees it;
// the release message follows. Every block the local client reads is
// intact.
func TestLateRDMANeverLandsInReusedSlot(t *testing.T) {
	vmtest.Require(t)
	if !vmtest.TwoVMs() {
		t.Fatal("this package must run in two VMs: its rdsvm.json asks for them; was it started through rdsvm?")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ctl := newControl(t)
	if vmtest.Role() == vmtest.RolePeer {
		slowClient(t, ctx, ctl)
		return
	}
	serverSide(t, ctx, ctl)
}

func slowClient(t *testing.T, ctx context.Context, ctl *control) {
	sock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.LocalAddr4(), slowPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := blockserver.Dial(ctx, sock, netip.AddrPortFrom(vmtest.RemoteAddr4(), serverPort), &blockserver.ClientConfig{Buffers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctl.await(t, ctx, "ready", "go")
	var report []string
	for k := range writes {
		blk := uint64(nblocks/2 + k)
		start := time.Now()
		err := cl.WriteBlock(ctx, blk, func(b []byte) { copy(b, blockserver.Content(uint64(100+k), bsize)) })
		took := time.Since(start)
		q := cl.Pool().Stats().Quarantined
		line := fmt.Sprintf("write %d: %v after %v; quarantined buffers then: %d; client stats %+v", k, err, took.Round(time.Millisecond), q, cl.Stats())
		t.Log(line)
		report = append(report, line)
		time.Sleep(time.Second)
	}
	for start := time.Now(); cl.Pool().Stats().Quarantined != 0 && time.Since(start) < 20*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	ps, st := cl.Pool().Stats(), cl.Stats()
	t.Logf("slow client at the end: pool %+v, client stats %+v", ps, st)
	if ps.Quarantined != 0 {
		t.Errorf("%d buffers still quarantined: a release did not arrive", ps.Quarantined)
	}
	ctl.await(t, ctx, "finished", "done")
}

type snap struct {
	at time.Time
	st blockserver.ServerStats
}

func serverSide(t *testing.T, ctx context.Context, ctl *control) {
	path := filepath.Join(t.TempDir(), "blocks.img")
	model := blockserver.Content(seed, nblocks*bsize)
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ssock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.LocalAddr4(), serverPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ssock.Close()
	srv, err := blockserver.NewServer(ssock, f, &blockserver.ServerConfig{BlockSize: bsize, Slots: 1, Timeout: deadline})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		_, err := srv.Serve(sctx)
		served <- err
	}()
	csock, err := rdssock.Listen(netip.AddrPortFrom(vmtest.LocalAddr4(), localPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	local, err := blockserver.Dial(ctx, csock, netip.AddrPortFrom(vmtest.LocalAddr4(), serverPort), &blockserver.ClientConfig{Buffers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()

	ctl.await(t, ctx, "", "ready")
	ns, err := netlinkcfg.CurrentNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.SetNetem(vmtest.TwoVMLink, netlinkcfg.Netem{Delay: delay}); err != nil {
		t.Fatal(err)
	}
	defer h.ClearQdisc(vmtest.TwoVMLink)

	// Snapshots of the server's counters, every millisecond.
	var snaps []snap
	stopSnaps := make(chan struct{})
	snapped := make(chan struct{})
	go func() {
		defer close(snapped)
		for {
			snaps = append(snaps, snap{time.Now(), srv.Stats()})
			select {
			case <-stopSnaps:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	// The local client reads the blocks the slow one does not write.
	stopReads := make(chan struct{})
	var lat []time.Duration
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stopReads:
				return
			default:
			}
			blk := uint64(i % (nblocks / 2))
			start := time.Now()
			err := local.ReadBlock(ctx, blk, func(data []byte) error {
				if !bytes.Equal(data, model[int(blk)*bsize:int(blk+1)*bsize]) {
					return fmt.Errorf("block %d differs from the file", blk)
				}
				return nil
			})
			if err != nil {
				readErr = err
				return
			}
			lat = append(lat, time.Since(start))
		}
	}()
	ctl.send(ctx, "go")
	ctl.await(t, ctx, "go", "finished")
	close(stopReads)
	wg.Wait()
	// Let the last late statuses arrive, then stop sampling.
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(10 * time.Millisecond) {
		if st := srv.Stats(); st.LateFreed >= st.TimedOut {
			break
		}
	}
	close(stopSnaps)
	<-snapped
	if readErr != nil {
		t.Fatalf("local client: %v", readErr)
	}
	st := srv.Stats()
	t.Logf("server stats: %+v", st)
	if st.TimedOut == 0 {
		t.Fatalf("no transfer timed out: the delay did not reach the slow client's transfers")
	}
	// A late status that arrives before the dispatcher answered the
	// timeout makes the answer an ordinary failure, with no release.
	if st.LateFreed != st.TimedOut || st.Releases > st.TimedOut {
		t.Errorf("%d timed out, %d freed by a late status, %d releases sent", st.TimedOut, st.LateFreed, st.Releases)
	}
	// For each timed-out transfer: the window from the first snapshot
	// that shows it timed out to the last one before its late status.
	// The local client must get no read served in it.
	for k := uint64(1); k <= st.TimedOut; k++ {
		a := slices.IndexFunc(snaps, func(s snap) bool { return s.st.TimedOut >= k })
		b := slices.IndexFunc(snaps, func(s snap) bool { return s.st.LateFreed >= k })
		if a < 0 || b < a {
			t.Errorf("timeout %d: snapshots %d and %d do not bracket it", k, a, b)
			continue
		}
		if b == a {
			t.Logf("timeout %d: late status within the same 1 ms snapshot", k)
			continue
		}
		held := snaps[b].at.Sub(snaps[a].at)
		served := snaps[b-1].st.Reads - snaps[a].st.Reads
		t.Logf("timeout %d: slot held %v after the timeout was reported, until the kernel's late status; local reads served meanwhile: %d",
			k, held.Round(time.Millisecond), served)
		if served != 0 {
			t.Errorf("timeout %d: %d reads served while the slot was held", k, served)
		}
	}
	slices.Sort(lat)
	t.Logf("local client: %d reads, every one intact; median %v, max %v", len(lat), lat[len(lat)/2], lat[len(lat)-1])
	scancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Serve: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("server Close: %v", err)
	}
	h.ClearQdisc(vmtest.TwoVMLink)
	for range 6 {
		ctl.send(ctx, "done")
		time.Sleep(300 * time.Millisecond)
	}
}
