package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

// maxMessage is the kernel's cap on one RDS message (RDS_MAX_MSG_SIZE).
const maxMessage = 1 << 20

// parseAddrPort parses a literal IP with an RDS port.
func parseAddrPort(what, s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		if _, aerr := netip.ParseAddr(s); aerr == nil {
			return netip.AddrPort{}, usagef("bad %s %q: a port is missing, for example %s:4000", what, s, bracket(s))
		}
		return netip.AddrPort{}, usagef("bad %s %q: want IP:PORT such as 10.0.0.1:4000 or [fd00::1]:4000 (RDS has no name resolution)", what, s)
	}
	return ap, checkAddr(what, ap.Addr())
}

// parseAddrOptPort parses an IP with an optional port (0 when missing).
func parseAddrOptPort(what, s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), checkAddr(what, a)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, checkAddr(what, ap.Addr())
	}
	return netip.AddrPort{}, usagef("bad %s %q: want IP or IP:PORT such as 10.0.0.1 or 10.0.0.1:4000 (RDS has no name resolution)", what, s)
}

// parseAddr parses a literal IP; a port is not allowed.
func parseAddr(what, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		if _, perr := netip.ParseAddrPort(s); perr == nil {
			return netip.Addr{}, usagef("bad %s %q: give an address without a port", what, s)
		}
		return netip.Addr{}, usagef("bad %s %q: want an IP address such as 10.0.0.1 or fd00::1 (RDS has no name resolution)", what, s)
	}
	return a, checkAddr(what, a)
}

func checkAddr(what string, a netip.Addr) error {
	if a.IsUnspecified() {
		return usagef("bad %s %v: RDS cannot use the unspecified address; give one configured on an interface", what, a)
	}
	if a.IsMulticast() {
		return usagef("bad %s %v: RDS has no multicast", what, a)
	}
	if a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == "" {
		return usagef("bad %s %v: an IPv6 link-local address needs a zone, for example fe80::1%%eth0", what, a)
	}
	return nil
}

func bracket(s string) string {
	if strings.Contains(s, ":") {
		return "[" + s + "]"
	}
	return s
}

// sockFlags are the socket options shared by the subcommands that bind.
type sockFlags struct {
	netns     string
	transport string
	sndbuf    sizeValue
	rcvbuf    sizeValue
	busyPoll  time.Duration
}

func (s *sockFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.netns, "netns", "", "run in the named network namespace (`NAME` as in ip netns, /run/netns/NAME)")
	fs.StringVar(&s.transport, "transport", "auto", "RDS transport: auto, tcp or ib (auto: ib where the address has an RDMA device, else tcp)")
	fs.Var(&s.sndbuf, "sndbuf", "socket send buffer in `BYTES` (4096, 64k, 8m; 0: system default; a message may be about half of it)")
	fs.Var(&s.rcvbuf, "rcvbuf", "socket receive buffer in `BYTES` (4096, 64k, 8m; 0: system default)")
	fs.DurationVar(&s.busyPoll, "busy-poll", 0, "retry an empty receive for up to `DURATION` before waiting: lower latency, more CPU (0: wait at once)")
}

// config builds a rdssock.Config. The returned namespace (nil for the
// current one) must be closed by the caller after the socket is made.
func (s *sockFlags) config() (*rdssock.Config, *netlinkcfg.Namespace, error) {
	cfg := &rdssock.Config{SendBuffer: int(s.sndbuf), ReceiveBuffer: int(s.rcvbuf), BusyPoll: s.busyPoll}
	if s.busyPoll < 0 {
		return nil, nil, usagef("-busy-poll must not be negative (0 waits at once)")
	}
	if s.transport != "" && s.transport != "auto" {
		t, err := rdssock.ParseTransport(s.transport)
		if err != nil || (t != rdssock.TransportTCP && t != rdssock.TransportIB) {
			return nil, nil, usagef("bad -transport %q: want auto, tcp or ib", s.transport)
		}
		cfg.Transport = t
	}
	if os.Geteuid() == 0 && (s.sndbuf > 0 || s.rcvbuf > 0) {
		cfg.ForceBuffers = true // root may exceed net.core.[rw]mem_max
	}
	if s.netns == "" {
		return cfg, nil, nil
	}
	ns, err := netlinkcfg.OpenNamespace(s.netns)
	if err != nil {
		return nil, nil, fmt.Errorf("network namespace %q: %w (list them with: ip netns list)", s.netns, err)
	}
	cfg.NetNS = ns.FD()
	return cfg, ns, nil
}

// listen binds a socket with the flags' options and explains failures.
func (s *sockFlags) listen(ap netip.AddrPort, tweak func(*rdssock.Config)) (*rdssock.Conn, error) {
	cfg, ns, err := s.config()
	if err != nil {
		return nil, err
	}
	if ns != nil {
		defer ns.Close()
	}
	if tweak != nil {
		tweak(cfg)
	}
	c, err := rdssock.Listen(ap, cfg)
	if err != nil {
		return nil, explain(err, ap)
	}
	return c, nil
}

// sourceFor picks the local address the kernel would use to reach dst, in
// the flags' namespace, by routing a UDP socket (nothing is sent).
func (s *sockFlags) sourceFor(dst netip.Addr) (netip.Addr, error) {
	var src netip.Addr
	find := func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
		if err != nil {
			return fmt.Errorf("no route to %v: %w (give the source with -from)", dst, err)
		}
		defer c.Close()
		src = c.LocalAddr().(*net.UDPAddr).AddrPort().Addr()
		if dst.Is4() {
			src = src.Unmap()
		}
		if dst.Zone() != "" && src.Zone() == "" {
			src = src.WithZone(dst.Zone())
		}
		return nil
	}
	if s.netns == "" {
		return src, find()
	}
	ns, err := netlinkcfg.OpenNamespace(s.netns)
	if err != nil {
		return src, fmt.Errorf("network namespace %q: %w (list them with: ip netns list)", s.netns, err)
	}
	defer ns.Close()
	return src, ns.Do(find)
}

// explain adds what to do to errors whose rdssock text leaves it out.
func explain(err error, ap netip.AddrPort) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%w\n  port %d on %v is in use by another RDS socket: pick another port, or port 0 for any free one", err, ap.Port(), ap.Addr())
	case errors.Is(err, rdssock.ErrMessageTooLarge):
		return fmt.Errorf("%w\n  raise the send buffer with -sndbuf (about twice the message size; as root it may exceed net.core.wmem_max)", err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w\n  this needs more privileges (run as root)", err)
	}
	return err
}

// sizeValue is a flag holding a byte count: 4096, 64k, 1m (powers of
// 1024). Every byte-count flag of rdscat uses it, so all accept the same
// forms.
type sizeValue int

// String prints the size as the flag takes it, with k or m when exact.
func (v *sizeValue) String() string {
	n := int(*v)
	switch {
	case n != 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "m"
	case n != 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "k"
	}
	return strconv.Itoa(n)
}

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

// maxSize is the largest byte count a size flag takes (1 GiB): more than
// any RDS message or socket buffer, and within the kernel's int.
const maxSize = 1 << 30

// parseSize parses a byte count: digits with an optional k, kib, m or mib.
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "kib"):
		mult, t = 1<<10, strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "k")
	case strings.HasSuffix(t, "m"), strings.HasSuffix(t, "mib"):
		mult, t = 1<<20, strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "m")
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || n > maxSize/mult {
		return 0, fmt.Errorf("want a byte count such as 4096, 64k or 1m, at most 1024m")
	}
	return n * mult, nil
}

// fmtDur prints a duration in milliseconds with three decimals.
func fmtMS(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }

// checkMessageSize rejects sizes above the kernel's 1 MiB cap.
func checkMessageSize(what string, n int) error {
	if n > maxMessage {
		return usagef("%s of %d bytes is over RDS's limit of 1 MiB (%d bytes) per message", what, n, maxMessage)
	}
	return nil
}

// bufferFor returns a send buffer size that lets messages of n bytes
// through (the kernel allows about half of SO_SNDBUF, which it doubles).
func bufferFor(n int) int {
	if n <= 64<<10 {
		return 0
	}
	return n + 64<<10
}

// contextDeadline is context.DeadlineExceeded, named for errors.Is checks.
var contextDeadline = context.DeadlineExceeded

func isRoot() bool { return os.Geteuid() == 0 }

// netErrClosed is net.ErrClosed, returned by reads on a closed socket.
var netErrClosed = net.ErrClosed

// warmUp pings peer from c until the kernel there answers, or wait passes,
// and on RDS/TCP then waits for the connection's TCP paths to come up.
// On the kernels measured, the first data message on a new RDS/TCP
// connection across namespaces was sometimes lost (the sender's TCP got it
// acknowledged, the receiver never delivered it) while the multipath
// connections were still being set up; a ping answered first proves the
// connection carries traffic both ways, and waiting for the paths avoids
// the race. Pings are answered by
// the peer's kernel only while its net.rds.ping_enable is 1; warmUp reports
// whether a reply came. Later duplicate replies arrive as 0-byte messages
// from port 0, which every reader here ignores.
func warmUp(e *env, c *rdssock.Conn, peer netip.Addr, wait time.Duration) (bool, error) {
	if wait <= 0 {
		return false, nil
	}
	target := netip.AddrPortFrom(peer, 0)
	ctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	buf := make([]byte, 64)
	for {
		if _, err := c.WriteMsgContext(ctx, nil, nil, target); err != nil && !errors.Is(err, rdssock.ErrCongested) {
			if ctx.Err() != nil {
				return false, e.ctx.Err()
			}
			return false, explain(err, target)
		}
		rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		for {
			n, _, _, from, err := c.ReadMsgContext(rctx, buf, nil)
			if err != nil {
				break
			}
			if n == 0 && from == target {
				rcancel()
				return true, waitPaths(ctx, c, peer)
			}
		}
		rcancel()
		if ctx.Err() != nil {
			return false, e.ctx.Err()
		}
	}
}

// mpathWorkers is RDS_MPATH_WORKERS: the TCP paths of one RDS/TCP
// connection on current kernels.
const mpathWorkers = 8

// waitPaths waits until the RDS/TCP connection from c to peer has all its
// TCP paths, or their number has not changed for half a second (kernels or
// peers without multipath), or ctx is done. Other transports return at once.
func waitPaths(ctx context.Context, c *rdssock.Conn, peer netip.Addr) error {
	if tr, err := c.Transport(); err != nil || tr != rdssock.TransportTCP {
		return nil
	}
	local := c.LocalAddrPort().Addr().Unmap()
	peer = peer.Unmap()
	last, since := -1, time.Now()
	for {
		socks, err := c.TCPSockets6()
		if err != nil {
			return nil // the table is an optimisation, not a requirement
		}
		n := 0
		for _, s := range socks {
			l, p := s.Local.Addr().Unmap(), s.Peer.Addr().Unmap()
			if (l == local && p == peer) || (l == peer && p == local) {
				n++
			}
		}
		if n >= mpathWorkers || (n > 0 && n == last && time.Since(since) > 500*time.Millisecond) {
			return nil
		}
		if n != last {
			last, since = n, time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}
