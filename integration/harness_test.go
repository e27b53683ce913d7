//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/internal/rawrds"
	"github.com/go-rds/rds/integration/vmtest"
)

const recvWait = 30 * time.Second

func open(t *testing.T) *rawrds.Socket {
	t.Helper()
	s, err := rawrds.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openPeer creates a socket inside the peer namespace, bound to addr.
func openPeer(t *testing.T, addr netip.Addr) (*rawrds.Socket, netip.AddrPort) {
	t.Helper()
	var s *rawrds.Socket
	var bound netip.AddrPort
	err := vmtest.InPeerNamespace(func() error {
		var err error
		if s, err = rawrds.Open(); err != nil {
			return err
		}
		bound, err = s.Bind(netip.AddrPortFrom(addr, 0))
		return err
	})
	if s != nil {
		t.Cleanup(func() { s.Close() })
	}
	if err != nil {
		t.Fatalf("in namespace %s: %v", vmtest.PeerNamespaceName, err)
	}
	return s, bound
}

func bind(t *testing.T, s *rawrds.Socket, addr netip.Addr) netip.AddrPort {
	t.Helper()
	ap, err := s.Bind(netip.AddrPortFrom(addr, 0))
	if err != nil {
		t.Fatal(err)
	}
	if ap.Addr() != addr || ap.Port() == 0 {
		t.Fatalf("bound to %v, want %v with a kernel-chosen port", ap, addr)
	}
	return ap
}

func wantTransport(t *testing.T, s *rawrds.Socket, want uint32) {
	t.Helper()
	got, err := s.Transport()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("SO_RDS_TRANSPORT = %d, want %d", got, want)
	}
}

// exchange sends one datagram each way between a and b and checks payloads
// and source addresses.
func exchange(t *testing.T, a *rawrds.Socket, aAddr netip.AddrPort, b *rawrds.Socket, bAddr netip.AddrPort) {
	t.Helper()
	buf := make([]byte, 256)
	for _, dir := range []struct {
		from, to         *rawrds.Socket
		fromAddr, toAddr netip.AddrPort
	}{{a, b, aAddr, bAddr}, {b, a, bAddr, aAddr}} {
		msg := []byte(fmt.Sprintf("hello from %v to %v", dir.fromAddr, dir.toAddr))
		if err := dir.from.SendTo(msg, dir.toAddr); err != nil {
			t.Fatal(err)
		}
		n, src, err := dir.to.RecvFrom(buf, recvWait)
		if err != nil {
			t.Fatalf("%v waiting for %q: %v", dir.toAddr, msg, err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("received %q, want %q", buf[:n], msg)
		}
		if src != dir.fromAddr {
			t.Fatalf("message came from %v, want %v", src, dir.fromAddr)
		}
	}
}

func TestModulesLoaded(t *testing.T) {
	vmtest.Require(t)
	builtin, err := os.ReadFile("/lib/modules/" + vmtest.KernelRelease() + "/modules.builtin")
	if err != nil {
		t.Fatal(err)
	}
	isBuiltin := func(name string) bool {
		for _, l := range strings.Fields(string(builtin)) {
			base := l[strings.LastIndexByte(l, '/')+1:]
			if strings.ReplaceAll(strings.TrimSuffix(base, ".ko"), "-", "_") == name {
				return true
			}
		}
		return false
	}
	for _, m := range []string{"rds", "rds_tcp", "rds_rdma", "rdma_rxe", "veth", "crc32_generic", "sch_netem"} {
		ok, err := vmtest.ModuleLoaded(m)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ok:
		case isBuiltin(m):
			t.Logf("module %s is built in", m)
		case m == "crc32_generic" && isBuiltin("crc32"):
			// Linux 6.14 and later: crc32 is a built-in library and
			// crc32_generic is gone.
			t.Logf("no %s: crc32 is built in", m)
		default:
			t.Errorf("module %s is not loaded", m)
		}
	}
	t.Logf("kernel %s, role %s", vmtest.KernelRelease(), vmtest.Role())
}

func TestBindEachAddress(t *testing.T) {
	vmtest.Require(t)
	for _, tc := range []struct {
		addr  netip.Addr
		trans uint32
	}{
		{vmtest.Loopback4, rawrds.TransLoop},
		{vmtest.Loopback6, rawrds.TransLoop},
		{vmtest.TCPLocal4, rawrds.TransTCP},
		{vmtest.TCPLocal6, rawrds.TransTCP},
		{vmtest.IBAddr1, rawrds.TransIB},
		{vmtest.IBAddr2, rawrds.TransIB},
	} {
		t.Run(tc.addr.String(), func(t *testing.T) {
			s := open(t)
			wantTransport(t, s, rawrds.TransNone)
			bind(t, s, tc.addr)
			wantTransport(t, s, tc.trans)
		})
	}
	for _, addr := range []netip.Addr{vmtest.TCPPeer4, vmtest.TCPPeer6} {
		t.Run("peer-"+addr.String(), func(t *testing.T) {
			s, _ := openPeer(t, addr)
			wantTransport(t, s, rawrds.TransTCP)
		})
	}
}

func TestLoopbackDatagram(t *testing.T) {
	vmtest.Require(t)
	for _, addr := range []netip.Addr{vmtest.Loopback4, vmtest.Loopback6} {
		t.Run(addr.String(), func(t *testing.T) {
			a, b := open(t), open(t)
			exchange(t, a, bind(t, a, addr), b, bind(t, b, addr))
		})
	}
}

func TestTCPAcrossNamespaces(t *testing.T) {
	vmtest.Require(t)
	for _, tc := range []struct {
		name        string
		local, peer netip.Addr
	}{
		{"v4", vmtest.TCPLocal4, vmtest.TCPPeer4},
		{"v6", vmtest.TCPLocal6, vmtest.TCPPeer6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := open(t)
			aAddr := bind(t, a, tc.local)
			b, bAddr := openPeer(t, tc.peer)
			exchange(t, a, aAddr, b, bAddr)
			wantTransport(t, a, rawrds.TransTCP)
			wantTransport(t, b, rawrds.TransTCP)
		})
	}
}

func TestIBDatagram(t *testing.T) {
	vmtest.Require(t)
	a, b := open(t), open(t)
	aAddr, bAddr := bind(t, a, vmtest.IBAddr1), bind(t, b, vmtest.IBAddr2)
	wantTransport(t, a, rawrds.TransIB)
	wantTransport(t, b, rawrds.TransIB)
	exchange(t, a, aAddr, b, bAddr)
}

// TestPing sends RDS pings (empty messages to port 0); the kernel answers
// from port 0 with an empty message.
func TestPing(t *testing.T) {
	vmtest.Require(t)
	for _, tc := range []struct {
		name          string
		local, remote netip.Addr
	}{
		{"tcp-v4", vmtest.TCPLocal4, vmtest.TCPPeer4},
		{"tcp-v6", vmtest.TCPLocal6, vmtest.TCPPeer6},
		{"ib", vmtest.IBAddr1, vmtest.IBAddr2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			bind(t, s, tc.local)
			if err := s.SendTo(nil, netip.AddrPortFrom(tc.remote, 0)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			n, src, err := s.RecvFrom(buf, recvWait)
			if err != nil {
				t.Fatalf("waiting for the ping reply: %v", err)
			}
			if want := netip.AddrPortFrom(tc.remote, 0); n != 0 || src != want {
				t.Fatalf("ping reply: %d bytes from %v, want 0 bytes from %v", n, src, want)
			}
		})
	}
}

// TestGuestEnvironment checks what the guest init promises every test: the
// environment variables, working directory, hostname, a minimal /etc, the
// oops policy and the topology's namespace and rxe port.
func TestGuestEnvironment(t *testing.T) {
	vmtest.Require(t)
	for k, want := range map[string]string{
		"RDSVM_GUEST":          "1",
		"RDSVM_ROLE":           vmtest.RoleMain,
		"RDSVM_VMS":            "1",
		"RDSVM_KERNEL_RELEASE": vmtest.KernelRelease(),
		"HOME":                 "/tmp",
	} {
		if got := os.Getenv(k); got != want {
			t.Errorf("$%s = %q, want %q", k, got, want)
		}
	}
	if wd, err := os.Getwd(); err != nil || wd != "/rdsvm/pkg" {
		t.Errorf("working directory %q (%v), want /rdsvm/pkg", wd, err)
	}
	if h, err := os.Hostname(); err != nil || h != "rdsvm-main" {
		t.Errorf("hostname %q (%v), want rdsvm-main", h, err)
	}
	if addrs, err := net.LookupHost("localhost"); err != nil || len(addrs) == 0 {
		t.Errorf("localhost does not resolve: %v %v", addrs, err)
	}
	for file, want := range map[string]string{
		"/proc/sys/kernel/panic_on_oops":                  "1",
		"/sys/class/infiniband/rxe0/ports/1/state":        "4: ACTIVE",
		"/sys/class/net/" + vmtest.IBLink + "/carrier":    "1",
		"/sys/class/net/" + vmtest.TCPLink + "/operstate": "up",
		"/sys/class/net/" + vmtest.TCPLink + "/carrier":   "1",
	} {
		b, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %q", file, strings.TrimSpace(string(b)), err, want)
		}
	}
	ns, err := vmtest.PeerNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if ns.FD() < 0 {
		t.Fatal("peer namespace has no descriptor")
	}
	err = vmtest.InPeerNamespace(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), vmtest.TCPPeerLink+":") || strings.Contains(string(b), vmtest.TCPLink+":") {
			return fmt.Errorf("peer namespace links:\n%s", b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inside %s: %v", vmtest.PeerNamespaceName, err)
	}
}
