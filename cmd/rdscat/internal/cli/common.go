//go:build linux

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

// check reports a bad -busy-poll or -transport as a usage error, and
// returns the transport asked for (TransportAuto for auto).
func (s *sockFlags) check() (rdssock.Transport, error) {
	var t rdssock.Transport
	if s.busyPoll < 0 {
		return t, usagef("-busy-poll must not be negative (0 waits at once)")
	}
	t, ok := parseTransport(s.transport)
	if !ok {
		return t, usagef("bad -transport %q: want auto, tcp or ib", s.transport)
	}
	return t, nil
}

// parseTransport maps a -transport value to the transport to request:
// auto (or empty), tcp, or ib and its other names.
func parseTransport(s string) (rdssock.Transport, bool) {
	switch s {
	case "", "auto":
		return rdssock.TransportAuto, true
	case "tcp":
		return rdssock.TransportTCP, true
	case "ib", "infiniband", "rdma", "roce":
		return rdssock.TransportIB, true
	}
	return rdssock.TransportAuto, false
}

// config builds a rdssock.Config. The returned namespace (nil for the
// current one) must be closed by the caller after the socket is made.
func (s *sockFlags) config() (*rdssock.Config, *netlinkcfg.Namespace, error) {
	// WaitCongested: a send to a congested port waits in the runtime
	// poller for the kernel's update, as a blocking C socket would,
	// instead of sleeping and trying again.
	cfg := &rdssock.Config{SendBuffer: int(s.sndbuf), ReceiveBuffer: int(s.rcvbuf), BusyPoll: s.busyPoll, WaitCongested: true}
	t, err := s.check()
	if err != nil {
		return nil, nil, err
	}
	cfg.Transport = t
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
	if _, err := s.check(); err != nil {
		return src, err // a usage error, whatever the route
	}
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

// warmUp brings the RDS connection from c's address to peer up with
// rdssock.WarmUp (in sf's namespace, with c's transport; sf may be nil for
// the current namespace), waiting up to wait, and reports whether it came
// up. Sends warm a new RDS/TCP connection up by themselves (rdssock's
// Config.NoAutoWarmUp), within a few seconds; this call also checks, ahead
// of the data, that the peer's kernel answers RDS pings (only while its
// net.rds.ping_enable is 1), and on InfiniBand that the connection comes up.
func warmUp(e *env, sf *sockFlags, c *rdssock.Conn, peer netip.Addr, wait time.Duration) (bool, error) {
	if wait <= 0 {
		return false, nil
	}
	cfg := &rdssock.Config{}
	if sf != nil {
		var ns *netlinkcfg.Namespace
		var err error
		if cfg, ns, err = sf.config(); err != nil {
			return false, err
		}
		if ns != nil {
			defer ns.Close()
		}
	}
	if tr, err := c.Transport(); err == nil && (tr == rdssock.TransportTCP || tr == rdssock.TransportIB) {
		cfg.Transport = tr
	}
	ctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	switch err := rdssock.WarmUp(ctx, c.LocalAddrPort().Addr(), peer, cfg); {
	case err == nil:
		return true, nil
	case e.ctx.Err() != nil:
		return false, e.ctx.Err()
	case ctx.Err() != nil:
		return false, nil
	default:
		return false, explain(err, netip.AddrPortFrom(peer, 0))
	}
}
