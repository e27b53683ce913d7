//go:build integration

package reliability

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
)

// cFaultBin is the C flow of integration/internal/bench/cbaseline/rdsfault.c,
// built on the host by go generate (the VM has no compiler) and shipped by
// rdsvm with testdata/.
const cFaultBin = "testdata/rdsfault-c"

// cFlow is a running rdsfault-c: two blocking C senders in the initial
// namespace and a receiver in the peer namespace, over the same veth pair
// as the Go flow, so that it meets the same fault.
type cFlow struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
}

// cResult is what rdsfault-c counted. stuck counts its senders that
// stopped because the kernel refused a message (ENOBUFS, or EAGAIN for a
// non-blocking sender) for stuckAfter, as a Go sender stops; stuckcong those of them last refused as
// congested.
type cResult struct {
	accepted, received, lost, dup, reordered, corrupt, blocks, senderr, stuck, stuckcong int
}

// startCFlow starts rdsfault-c with two senders that run until stop. It
// returns nil, and says why in the log, if the program was not built; a
// deviation then has no C reproduction.
func startCFlow(t *testing.T) *cFlow {
	t.Helper()
	base := port()
	port() // the senders' ports base+1 and base+2
	port()
	return startC(t, true, "local="+vmtest.TCPLocal4.String(), "peer="+vmtest.TCPPeer4.String(),
		"port="+strconv.Itoa(int(base)), "netns="+nsPath(peer), "senders=2", "pace_us=2000", "idle_ms=5000")
}

// cFreshSenders is how many C sockets send on each fresh connection beside
// the one Go sender: each hashes to its own path, so the C side meets the
// kernel's fresh-connection deviations (lane switch, accept-discard) in
// more runs than a single socket would.
const cFreshSenders = 4

// startCFresh starts rdsfault-c: cFreshSenders sockets each send n
// messages at once from from (in namespace s) to to, the first messages on
// a brand-new connection, with no warm-up and non-blocking sends (as the
// Go senders); with bothWays a second one does the same the other way at
// the same moment. It returns nil if the program was not built.
func startCFresh(t *testing.T, s side, from, to netip.Addr, n int, bothWays bool) []*cFlow {
	t.Helper()
	type way struct {
		s        side
		from, to netip.Addr
	}
	other := peer
	if s == peer {
		other = local
	}
	ways := []way{{s, from, to}}
	if bothWays {
		ways = append(ways, way{other, to, from})
	}
	var cs []*cFlow
	for _, w := range ways {
		base := port()
		for range cFreshSenders {
			port() // the senders' ports base+1...
		}
		recvSide := peer
		if w.s == peer {
			recvSide = local
		}
		args := []string{"local=" + w.from.String(), "peer=" + w.to.String(), "port=" + strconv.Itoa(int(base)),
			"senders=" + strconv.Itoa(cFreshSenders), "pace_us=0", "idle_ms=3000", "count=" + strconv.Itoa(n), "nonblock=1"}
		if recvSide == peer {
			args = append(args, "netns="+nsPath(peer))
		}
		if w.s == peer {
			args = append(args, "sendns="+nsPath(peer))
		}
		c := startC(t, false, args...)
		if c == nil {
			return nil
		}
		cs = append(cs, c)
	}
	return cs
}

// nsPath is the file that names namespace s for setns.
func nsPath(s side) string {
	if s == peer {
		return "/run/netns/" + vmtest.PeerNamespaceName
	}
	return "/proc/1/ns/net"
}

// startC runs rdsfault-c with args; with untilStop its senders run until
// stop closes their standard input.
func startC(t *testing.T, untilStop bool, args ...string) *cFlow {
	t.Helper()
	bin, err := filepath.Abs(cFaultBin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		// rdstest builds it before the integration stage; by hand, run
		// go generate ./integration/reliability first.
		t.Fatalf("no C reference to compare the kernel's behaviour with: %v (build it with go generate ./integration/reliability)", err)
	}
	args = append(args, "stuck_ms="+strconv.FormatInt(stuckAfter.Milliseconds(), 10))
	c := &cFlow{cmd: exec.Command(bin, args...)}
	c.cmd.Stdout = &c.out
	c.cmd.Stderr = &c.out
	if untilStop {
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

// stop ends the C senders (if they run until stopped), waits for the
// receiver to finish, and returns its counts.
func (c *cFlow) stop(t *testing.T) cResult {
	t.Helper()
	if c.stdin != nil {
		c.stdin.Close()
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("rdsfault-c: %v\n%s", err, c.out.String())
		}
	case <-time.After(90 * time.Second):
		c.cmd.Process.Kill()
		<-done
		t.Fatalf("rdsfault-c did not finish\n%s", c.out.String())
	}
	r, err := parseCResult(c.out.String())
	if err != nil {
		t.Fatalf("rdsfault-c: %v\n%s", err, c.out.String())
	}
	return r
}

// parseCResult reads rdsfault-c's RDSFAULT line.
func parseCResult(out string) (cResult, error) {
	var r cResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "|")
		if fs[0] != "RDSFAULT" {
			continue
		}
		got := 0
		for _, f := range fs[1:] {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("field %q: %w", f, err)
			}
			p := map[string]*int{"accepted": &r.accepted, "received": &r.received, "lost": &r.lost, "dup": &r.dup,
				"reordered": &r.reordered, "corrupt": &r.corrupt, "blocks": &r.blocks, "senderr": &r.senderr,
				"stuck": &r.stuck, "stuckcong": &r.stuckcong}[k]
			if p == nil {
				return r, fmt.Errorf("unknown field %q", f)
			}
			*p = n
			got++
		}
		if got != 10 {
			return r, fmt.Errorf("%d of 10 fields in %q", got, sc.Text())
		}
		return r, nil
	}
	return r, fmt.Errorf("no RDSFAULT line")
}

// cReproduced logs whether the C flow showed the same kind of deviation as
// the Go flow in this run; c < 0 means no C flow ran.
func cReproduced(t *testing.T, what, verb string, goCount, c int) {
	t.Helper()
	switch {
	case c < 0:
		t.Logf("kernel: %s: Go %s %d; no C flow ran", what, verb, goCount)
	case c == 0:
		t.Logf("kernel: %s not reproduced in C this run: Go %s %d, C %s 0", what, verb, goCount, verb)
	default:
		t.Logf("kernel: %s reproduced in C: Go %s %d, C %s %d", what, verb, goCount, verb, c)
	}
}
