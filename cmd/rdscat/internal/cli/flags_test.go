//go:build linux

package cli

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/go-rds/rds/rdssock"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"64k", 64 << 10, true}, {"64K", 64 << 10, true},
		{"64kib", 64 << 10, true}, {"1m", 1 << 20, true}, {"8m", 8 << 20, true}, {"8MiB", 8 << 20, true},
		{" 2m ", 2 << 20, true}, {"1024m", 1 << 30, true},
		{"1025m", 0, false}, {"2000000m", 0, false}, {"-1", 0, false}, {"12q", 0, false}, {"", 0, false}, {"m", 0, false},
	} {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestSizeFlagsShareParser: every flag of every command that takes a byte
// count (its usage names BYTES) accepts 64k and 8m, so none is a plain
// integer flag (as -sndbuf and -rcvbuf once were).
func TestSizeFlagsShareParser(t *testing.T) {
	seen := map[string]bool{}
	for name, c := range commands {
		fs, _ := newFlagSet(c, io.Discard)
		fs.VisitAll(func(f *flag.Flag) {
			if arg, _ := flag.UnquoteUsage(f); arg != "BYTES" {
				return
			}
			seen[f.Name] = true
			for in, want := range map[string]string{"64k": "64k", "65536": "64k", "8m": "8m", "8388608": "8m", "1000": "1000"} {
				if err := fs.Set(f.Name, in); err != nil {
					t.Errorf("rdscat %s -%s %s: %v", name, f.Name, in, err)
				} else if got := f.Value.String(); got != want {
					t.Errorf("rdscat %s -%s %s: value %s, want %s", name, f.Name, in, got, want)
				}
			}
		})
	}
	for _, f := range []string{"sndbuf", "rcvbuf", "size", "chunk", "fill", "ack-size", "rdma-size"} {
		if !seen[f] {
			t.Errorf("no command has a BYTES flag -%s", f)
		}
	}
}

// TestStressReceiverDuration: a receiver alone runs until interrupted
// unless -duration is given; with both ends the sender's duration rules.
func TestStressReceiverDuration(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"-listen", "10.0.0.2:4000"}, 0},
		{[]string{"-listen", "10.0.0.2:4000", "-once"}, 0},
		{[]string{"-listen", "10.0.0.2:4000", "-duration", "1m"}, time.Minute},
		{[]string{"-listen", "10.0.0.2:4000", "-duration", "0"}, 0},
		{[]string{"-listen", "10.0.0.2:4000", "-to", "10.0.0.2:4000", "-duration", "3s"}, 0},
	} {
		fs := flag.NewFlagSet("stress", flag.ContinueOnError)
		o := &stressOpts{fs: fs}
		o.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := o.receiverDuration(); got != c.want {
			t.Errorf("%v: receiver duration %v, want %v", c.args, got, c.want)
		}
	}
}

// TestSockFlagsCheckedBeforeRoute: a bad socket flag is a usage error
// before any route lookup, so the exit code does not depend on the routes
// of the machine (the VM has no route to most addresses).
func TestSockFlagsCheckedBeforeRoute(t *testing.T) {
	for _, s := range []sockFlags{{busyPoll: -time.Microsecond}, {transport: "carrier-pigeon"}} {
		_, err := s.sourceFor(netip.MustParseAddr("127.0.0.1"))
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("sourceFor with %+v: %v, want a usage error", s, err)
		}
	}
	if _, err := (&sockFlags{transport: "ib"}).sourceFor(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("sourceFor with good flags: %v", err)
	}
}

func TestParseTransport(t *testing.T) {
	for in, want := range map[string]rdssock.Transport{"": rdssock.TransportAuto, "auto": rdssock.TransportAuto, "tcp": rdssock.TransportTCP, "ib": rdssock.TransportIB, "infiniband": rdssock.TransportIB, "roce": rdssock.TransportIB} {
		if got, ok := parseTransport(in); !ok || got != want {
			t.Errorf("parseTransport(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	// loopback is chosen by address and iWARP is not supported: neither
	// can be asked for.
	for _, in := range []string{"loop", "iwarp", "udp", "TCP"} {
		if _, ok := parseTransport(in); ok {
			t.Errorf("parseTransport(%q) accepted", in)
		}
	}
}

// TestStressPorts: -ports N puts the receiver on N consecutive ports and
// spreads the sender's tasks over them; the first port must be given and
// the last must exist.
func TestStressPorts(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-listen", "10.0.0.2:4000", "-ports", "4"}, true},
		{[]string{"-to", "10.0.0.2:4000", "-ports", "4"}, true},
		{[]string{"-listen", "10.0.0.2:0"}, true},
		{[]string{"-listen", "10.0.0.2:0", "-ports", "2"}, false},
		{[]string{"-listen", "10.0.0.2:65534", "-ports", "2"}, true},
		{[]string{"-listen", "10.0.0.2:65535", "-ports", "2"}, false},
		{[]string{"-to", "10.0.0.2:65535", "-ports", "2"}, false},
		{[]string{"-to", "10.0.0.2:4000", "-ports", "0"}, false},
	} {
		fs := flag.NewFlagSet("stress", flag.ContinueOnError)
		o := &stressOpts{fs: fs}
		o.register(fs)
		if err := fs.Parse(append(c.args, "-size", "64", "-ack-size", "64")); err != nil {
			t.Fatal(err)
		}
		err := o.checkLimits()
		if err == nil {
			_, _, err = o.addresses()
		}
		var u *usageError
		if c.ok != (err == nil) || (err != nil && !errors.As(err, &u)) {
			t.Errorf("%v: %v, want ok %v (or a usage error)", c.args, err, c.ok)
		}
	}
	dst := netip.MustParseAddrPort("10.0.0.2:4000")
	for i, want := range []uint16{4000, 4001, 4002, 4000, 4001} {
		if got := taskDest(dst, i, 3); got != netip.AddrPortFrom(dst.Addr(), want) {
			t.Errorf("task %d of 3 ports: %v, want port %d", i, got, want)
		}
	}
	if got := taskDest(dst, 5, 1); got != dst {
		t.Errorf("task 5 of 1 port: %v, want %v", got, dst)
	}
}
