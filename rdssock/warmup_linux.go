//go:build linux

package rdssock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// How a new RDS/TCP connection comes up, and what a blocking C socket waits
// for (net/rds/send.c, rds_send_mprds_hash): a socket's messages go on the
// connection's path hash(port) mod c_npaths, where c_npaths is the peer's
// path count, learnt from the handshake: the kernel sends a probe ping from
// port 1 (with RDS_EXTHDR_NPATHS) on path 0, and the peer's pong sets
// c_npaths. Until then a blocking sender whose hash is not 0 sleeps on
// c_hs_waitq; a non-blocking one (every Conn) sends on path 0 instead, and
// on its own path once c_npaths is known, so its later messages can
// overtake the first ones (RDS orders per path). The smaller address then
// connects paths 1 to c_npaths-1 (rds_start_mprds), and an accepting
// kernel that has not yet recorded c_npaths resets those TCP connections,
// losing messages their TCP already acknowledged (see the BUG notes).
//
// A warm-up waits for the same condition from user space, where c_npaths
// cannot be read: it pings the peer from warmUpPingers temporary sockets
// bound to the same address. A ping from a socket whose hash is not 0 makes
// the kernel send its probe first, on the same path, so the answer to that
// ping comes after the probe's pong: c_npaths is set. Each temporary socket
// has a random hash, so with several the chance that none triggered the
// probe is (1/8)^warmUpPingers. It then waits until this end lists a TCP
// socket for every path (and, where the peer's end is visible too, as
// between namespaces of one kernel, that end as well), or the count has
// stopped changing (a peer without multipath uses one path; see bringUp
// for how a single path is told from a handshake not yet done). Loopback
// and InfiniBand connections have one path and need no warm-up.

// tcpPaths is how many TCP connections (paths) an RDS/TCP connection
// between two multipath-capable kernels uses (RDS_MPATH_WORKERS).
const tcpPaths = 8

const (
	// warmUpPingers is how many temporary sockets ping the peer in a
	// round, warmUpRounds how many rounds there are at most.
	warmUpPingers = 4
	warmUpRounds  = 3
	// pingInterval is how long a warm-up waits for an answer before it
	// pings again; the wait doubles after each unanswered ping, up to
	// maxPingInterval. An RDS ping is a reliable message that waits in the
	// queue until the connection is up, so pinging faster only leaves
	// pings to be answered after their socket closed (counted by the
	// kernel as recv_drop_no_sock).
	pingInterval    = 200 * time.Millisecond
	maxPingInterval = 2 * time.Second
	// pathsSettle is how long the path count must stay the same to count
	// as final when it is below tcpPaths.
	pathsSettle = 500 * time.Millisecond
	// autoAnswerWait bounds how long a Conn's automatic warm-up waits for
	// the peer to answer its ping; autoWarmUpLimit bounds the whole
	// warm-up. After either, the send goes ahead (see Config.NoAutoWarmUp).
	autoAnswerWait  = 3 * time.Second
	autoWarmUpLimit = 10 * time.Second
)

// WarmUp brings the RDS connection from local to peer fully up before an
// application sends data on it, and returns once it is: it pings peer from
// temporary sockets bound to local (with cfg's namespace, transport and
// TOS, which select the connection) until the kernel answers each, and on
// RDS/TCP it then waits until every path of the connection has its TCP
// connection, or the count has stopped growing for half a second (a peer
// without multipath uses one path). The application's own sockets and
// their queues are not touched.
//
// A Conn does the same by itself before its first send to each peer
// (unless Config.NoAutoWarmUp is set); WarmUp is for bringing a connection
// up ahead of time, and it waits as long as ctx allows.
//
// It works around two kernel behaviours. Before the handshake, the kernel
// sends a non-blocking socket's messages on path 0 and switches to the
// socket's own path afterwards, so early messages can be overtaken. And
// Linux up to at least 6.12 can lose messages sent while the paths of a
// new RDS/TCP connection are being set up (see the BUG notes), unless both
// hosts set up the same connection at the same moment.
func WarmUp(ctx context.Context, local, peer netip.Addr, cfg *Config) error {
	if ctx == nil {
		return fmt.Errorf("rdssock: warm-up %v -> %v: %w", local, peer, errNilContext)
	}
	answered, err := bringUp(ctx, local, peer, cfg, 0)
	switch {
	case err == nil:
		return nil
	case !answered && ctx.Err() != nil:
		return fmt.Errorf("rdssock: warm-up %v -> %v: no ping reply: %w", local, peer, ctx.Err())
	}
	return fmt.Errorf("rdssock: warm-up %v -> %v: %w", local, peer, err)
}

// bringUp is WarmUp. With answerWait above zero, each round waits at most
// that long for the answers. It reports whether every ping was answered.
//
// A round pings from new temporary sockets and then waits for the paths.
// If this end never shows a second path, c_npaths may still be 0 (every
// temporary socket had hash 0, or the kernel's one probe went unanswered),
// so up to warmUpRounds rounds ping from new sockets, whose new hashes
// trigger the probe again; a peer without multipath ends the last round.
func bringUp(ctx context.Context, local, peer netip.Addr, cfg *Config, answerWait time.Duration) (answered bool, err error) {
	for round := 1; ; round++ {
		multipath, err := bringUpRound(ctx, local, peer, cfg, answerWait)
		if err != nil || multipath || round == warmUpRounds {
			return err == nil || answered, err
		}
		answered = true
	}
}

// bringUpRound is one round of bringUp. It reports whether this end of the
// connection showed more than one path (or needs none).
func bringUpRound(ctx context.Context, local, peer netip.Addr, cfg *Config, answerWait time.Duration) (multipath bool, err error) {
	var socks [warmUpPingers]*Conn
	defer func() {
		for _, s := range socks {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i := range socks {
		if socks[i], err = Listen(netip.AddrPortFrom(local, 0), cfg); err != nil {
			return false, err
		}
	}
	pctx := ctx
	if answerWait > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, answerWait)
		defer cancel()
	}
	errs := make(chan error, len(socks))
	for _, s := range socks {
		go func() { errs <- pingUntilAnswered(pctx, s, peer) }()
	}
	for range socks {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return false, err
	}
	if tr, err := socks[0].Transport(); err != nil || tr != TransportTCP {
		return true, err
	}
	return waitPaths(ctx, socks[0], local, peer)
}

// pingUntilAnswered pings peer from s, again after pingInterval and then at
// growing intervals, until the kernel there answers (a 0-byte message from
// port 0). The answer's zone is compared without its spelling: s reports
// it by name (or, in another namespace, by index), while peer may give it
// either way; s is bound to one link, so only that link's peer answers.
func pingUntilAnswered(ctx context.Context, s *Conn, peer netip.Addr) error {
	target := netip.AddrPortFrom(peer, 0)
	want := peer.WithZone("")
	var buf [64]byte
	interval := pingInterval
	for {
		if _, err := s.WriteMsgContext(ctx, nil, nil, target, 0); err != nil && !errors.Is(err, ErrCongested) && !errors.Is(err, unix.EAGAIN) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, interval)
		interval = min(2*interval, maxPingInterval)
		for {
			n, _, _, from, err := s.ReadMsgContext(rctx, buf[:], nil, 0)
			if err != nil {
				break
			}
			if n == 0 && from.Port() == 0 && from.Addr().WithZone("") == want {
				cancel()
				return nil
			}
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// waitPaths waits until the RDS/TCP connection local -> peer has its TCP
// paths (see the comment at the top of this file), or their count has not
// changed for pathsSettle. It reads the kernel's tables through s, a
// socket in the connection's namespace, and reports whether this end has
// more than one path, which proves the handshake done: the smaller
// address connects, and the larger accepts, paths above 0 only once it
// knows c_npaths. A connection that the kernel gave the loopback transport
// (a TCP socket sending to an address of its own host) needs nothing.
func waitPaths(ctx context.Context, s *Conn, local, peer netip.Addr) (bool, error) {
	local, peer = local.WithZone("").Unmap(), peer.WithZone("").Unmap()
	conns, err := s.Connections()
	if err != nil {
		return false, err
	}
	for _, c := range conns {
		if c.Local.WithZone("").Unmap() == local && c.Remote.WithZone("").Unmap() == peer && c.Transport != "tcp" {
			return true, nil
		}
	}
	last, since := -1, time.Now()
	for {
		socks, err := s.TCPSockets()
		if err != nil {
			return false, err
		}
		mine, theirs := 0, 0
		for _, t := range socks {
			l, r := t.Local.Addr().WithZone("").Unmap(), t.Peer.Addr().WithZone("").Unmap()
			switch {
			case l == local && r == peer:
				mine++
			case l == peer && r == local:
				theirs++
			}
		}
		switch state := mine<<8 | theirs; {
		case mine >= tcpPaths && (theirs == 0 || theirs >= tcpPaths):
			return true, nil
		case state != last:
			last, since = state, time.Now()
		case time.Since(since) >= pathsSettle:
			return mine > 1, nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("%d of %d TCP paths up: %w", mine, tcpPaths, ctx.Err())
		case <-t.C:
		}
	}
}

// warmUps is a Conn's state for its automatic warm-ups.
type warmUps struct {
	off   atomic.Bool                                // Config.NoAutoWarmUp, or a transport that needs none
	ready atomic.Pointer[map[netip.Addr]*netip.Addr] // peers that need no warm-up (each with a copy that last may point to); replaced, never modified
	last  atomic.Pointer[netip.Addr]                 // the peer a send last found ready

	mu       sync.Mutex
	pending  map[netip.Addr]*warmCall
	netns    int // a duplicate of Config.NetNS, or 0
	stop     context.Context
	cancel   context.CancelFunc // called by Close
	running  sync.WaitGroup
	timeouts atomic.Uint64
}

// warmCall is one warm-up in progress; the sends that wait for it wait on
// done.
type warmCall struct {
	done chan struct{}
	err  error
}

// initWarmUps sets up the automatic warm-ups for a socket created with cfg.
func (c *Conn) initWarmUps(cfg *Config) error {
	w := &c.warm
	if cfg.NoAutoWarmUp {
		w.off.Store(true)
		return nil
	}
	if cfg.NetNS != 0 {
		fd, err := unix.FcntlInt(uintptr(cfg.NetNS), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return opError("socket", nil, nil, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC) of Config.NetNS", err))
		}
		w.netns = fd
	}
	w.stop, w.cancel = context.WithCancel(context.Background())
	return nil
}

// closeWarmUps ends the warm-ups in progress and releases their resources.
func (c *Conn) closeWarmUps() {
	w := &c.warm
	if w.cancel == nil {
		return
	}
	w.mu.Lock() // warmUpSlow starts warm-ups under mu, after checking stop
	w.cancel()
	w.mu.Unlock()
	w.running.Wait()
	if w.netns != 0 {
		unix.Close(w.netns)
	}
}

// warmedUp returns once the connection to the destination of a send to to
// (the Connect address if to is zero) is up, as a blocking C socket's send
// would, bringing it up first on this Conn's first send there. Sends to
// port 0 (pings) do not wait. A send with MSG_DONTWAIT (flags) does not
// wait either: it starts the warm-up and fails with EAGAIN until it is
// done. Once a peer is known, it allocates nothing.
func (c *Conn) warmedUp(ctx context.Context, to netip.AddrPort, flags int) error {
	if c.warm.off.Load() {
		return nil
	}
	if !to.IsValid() {
		p := c.peer.Load()
		if p == nil {
			return nil
		}
		to = p.AddrPort
	}
	if to.Port() == 0 {
		return nil
	}
	if c.warm.isReady(to.Addr()) {
		return nil
	}
	return c.warmUpSlow(ctx, to.Addr(), flags&unix.MSG_DONTWAIT != 0)
}

// isReady reports whether sends to peer need no warm-up. It compares peer
// with the last peer found first: a socket sends to the same peer message
// after message, and a map look-up hashes the address (without the CPU's
// AES instructions, as in the emulated test VM, the runtime's fallback
// hash showed in a profile of an rdscat receiver).
func (w *warmUps) isReady(peer netip.Addr) bool {
	if p := w.last.Load(); p != nil && *p == peer {
		return true
	}
	return w.inReadySet(peer)
}

func (w *warmUps) inReadySet(peer netip.Addr) bool {
	m := w.ready.Load()
	if m == nil {
		return false
	}
	p, ok := (*m)[peer]
	if ok {
		w.last.Store(p) // the set only grows (or starts over): p stays ready
	}
	return ok
}

// maxReadyPeers bounds the peers a Conn remembers as warmed up, so that a
// socket answering very many peers (hostile ones among them, with forged
// addresses) keeps bounded memory and copy work. Past it the set starts
// over: a forgotten peer's next send warms up again, which costs one ping
// round trip on a connection that is already up.
const maxReadyPeers = 4096

// markReadyLocked records that sends to peer need no warm-up.
func (w *warmUps) markReadyLocked(peer netip.Addr) {
	next := make(map[netip.Addr]*netip.Addr)
	if m := w.ready.Load(); m != nil && len(*m) < maxReadyPeers {
		for a, p := range *m {
			next[a] = p
		}
	}
	p := peer
	next[peer] = &p
	w.ready.Store(&next)
}

// warmUpSlow starts the warm-up for peer, or joins the one in progress,
// and waits for it within the send's context and write deadline (or not at
// all, with dontWait).
func (c *Conn) warmUpSlow(ctx context.Context, peer netip.Addr, dontWait bool) error {
	w := &c.warm
	local := c.LocalAddrPort()
	if !local.IsValid() || w.cancel == nil {
		return nil // unbound: the send fails by itself
	}
	if tr, err := c.Transport(); err != nil || tr != TransportTCP {
		// Only RDS/TCP has several paths; loopback and IB keep order
		// without waiting, as a blocking sender's kernel does.
		w.off.Store(true)
		return nil
	}
	w.mu.Lock()
	if w.stop.Err() != nil {
		w.mu.Unlock()
		return net.ErrClosed
	}
	if w.isReady(peer) {
		w.mu.Unlock()
		return nil
	}
	call := w.pending[peer]
	if call == nil {
		call = &warmCall{done: make(chan struct{})}
		if w.pending == nil {
			w.pending = make(map[netip.Addr]*warmCall)
		}
		w.pending[peer] = call
		w.running.Add(1)
		go c.runWarmUp(local.Addr(), peer, call)
	}
	w.mu.Unlock()

	if dontWait {
		select {
		case <-call.done:
			return call.err
		default:
			return wrapSyscall("sendmsg", unix.EAGAIN, "the connection to "+peer.String()+" is being brought up (Config.NoAutoWarmUp)")
		}
	}
	var ctxDone <-chan struct{}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	var deadline <-chan time.Time
	if d := c.writeDeadline.userDeadline(); !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-call.done:
		return call.err
	case <-ctxDone:
		return ctx.Err()
	case <-deadline:
		return os.ErrDeadlineExceeded
	}
}

// runWarmUp brings the connection to peer up for c, in its own goroutine
// so that sends giving up early do not end it for the others.
func (c *Conn) runWarmUp(local, peer netip.Addr, call *warmCall) {
	w := &c.warm
	defer w.running.Done()
	ctx, cancel := context.WithTimeout(w.stop, autoWarmUpLimit)
	defer cancel()
	cfg := &Config{Transport: TransportTCP, NetNS: w.netns, NoAutoWarmUp: true}
	answered, err := bringUp(ctx, local, peer, cfg, autoAnswerWait)
	w.mu.Lock()
	delete(w.pending, peer)
	switch {
	case w.stop.Err() != nil:
		call.err = net.ErrClosed
	case err == nil:
		w.markReadyLocked(peer)
	case errors.Is(err, context.DeadlineExceeded):
		// No answer within autoAnswerWait (the peer's kernel does
		// not answer pings, or is unreachable), or the paths did not
		// settle within autoWarmUpLimit: send as the kernel allows.
		w.timeouts.Add(1)
		w.markReadyLocked(peer)
	default:
		call.err = fmt.Errorf("warm-up %v -> %v (answered %t): %w", local, peer, answered, err)
	}
	w.mu.Unlock()
	close(call.done)
}

// WarmUpTimeouts returns how many of this Conn's automatic warm-ups gave up
// waiting (see Config.NoAutoWarmUp) and let the send go ahead.
func (c *Conn) WarmUpTimeouts() uint64 { return c.warm.timeouts.Load() }
