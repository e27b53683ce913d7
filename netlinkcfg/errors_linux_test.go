package netlinkcfg

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestExplainRxeAdd(t *testing.T) {
	all := ModuleStatus{RDS: true, RDSTCP: true, RDSRDMA: true, RdmaRxe: true, CRC32: true, Veth: true}
	noRxe := all
	noRxe.RdmaRxe = false
	noCRC := all
	noCRC.CRC32 = false
	for _, tc := range []struct {
		name  string
		err   error
		st    ModuleStatus
		known bool
		want  string
		is    []error
	}{
		{"rxe missing", unix.EINVAL, noRxe, true,
			"add rxe link rxe0 on veth0: rdma_rxe not loaded (modprobe rdma_rxe; also crc32_generic)",
			[]error{ErrModuleNotLoaded, unix.EINVAL}},
		{"crc32 missing", unix.ENOENT, noCRC, true,
			"add rxe link rxe0 on veth0: the crc32 algorithm rxe needs is missing (modprobe crc32_generic), kernel said: no such file or directory",
			[]error{ErrModuleNotLoaded, unix.ENOENT}},
		{"ENOENT, status unknown", unix.ENOENT, ModuleStatus{}, false,
			"add rxe link rxe0 on veth0: the crc32 algorithm rxe needs is missing (modprobe crc32_generic), kernel said: no such file or directory",
			[]error{ErrModuleNotLoaded}},
		{"netdev taken", unix.EEXIST, all, true,
			"add rxe link rxe0 on veth0: veth0 already has an rxe device (list them with RxeLinks; one per netdev)",
			[]error{ErrExists, unix.EEXIST}},
		{"name taken", unix.ENFILE, all, true,
			"add rxe link rxe0 on veth0: an RDMA device named rxe0 already exists (DeleteRxe it or pick another name)",
			[]error{ErrExists}},
		{"no netdev", unix.ENODEV, all, true,
			"add rxe link rxe0 on veth0: the RDMA subsystem cannot find netdev veth0 in the namespace of the netlink socket",
			[]error{ErrNotFound, unix.ENODEV}},
		{"EINVAL, status unknown", unix.EINVAL, ModuleStatus{}, false,
			"add rxe link rxe0 on veth0: kernel rejected the request (EINVAL): is rdma_rxe loaded (modprobe rdma_rxe; also crc32_generic)?",
			[]error{unix.EINVAL}},
		{"EPERM", unix.EPERM, all, true,
			"add rxe link rxe0 on veth0: operation not permitted (needs CAP_NET_ADMIN; rxe also refuses VLAN devices)",
			[]error{unix.EPERM}},
		{"ib_core missing", newError([]error{ErrModuleNotLoaded, unix.EPROTONOSUPPORT}, "open RDMA netlink socket: ib_core is not loaded"), noRxe, true,
			"add rxe link rxe0 on veth0: open RDMA netlink socket: ib_core is not loaded",
			[]error{ErrModuleNotLoaded, unix.EPROTONOSUPPORT}},
		{"other", unix.ENOMEM, all, true,
			"add rxe link rxe0 on veth0: cannot allocate memory",
			[]error{unix.ENOMEM}},
	} {
		err := explainRxeAdd("rxe0", "veth0", tc.err, tc.st, tc.known)
		if err.Error() != tc.want {
			t.Errorf("%s: error\n  %q\nwant\n  %q", tc.name, err, tc.want)
		}
		for _, target := range tc.is {
			if !errors.Is(err, target) {
				t.Errorf("%s: %v does not match %v", tc.name, err, target)
			}
		}
	}
}

func TestCfgErrorWrapping(t *testing.T) {
	err := newError([]error{ErrNotFound, nil, unix.ENODEV}, "link %s not found", "veth9")
	if err.Error() != "link veth9 not found" {
		t.Errorf("message %q", err)
	}
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, unix.ENODEV) || errors.Is(err, ErrExists) {
		t.Error("errors.Is does not see exactly the wrapped errors")
	}
	var errno unix.Errno
	if !errors.As(fmt.Errorf("outer: %w", err), &errno) || errno != unix.ENODEV {
		t.Errorf("errors.As through wrapping: %v", errno)
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.1/24", "192.0.2.1/24"},
		{"fd00::1/64", "fd00::1/64"},
		{"::ffff:192.0.2.7/120", "192.0.2.7/24"},
		{"10.0.0.1/32", "10.0.0.1/32"},
	} {
		got, err := checkPrefix(netip.MustParsePrefix(tc.in))
		if err != nil || got.String() != tc.want {
			t.Errorf("checkPrefix(%s) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []netip.Prefix{
		{}, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/64"),
		netip.MustParsePrefix("224.0.0.1/32"), netip.MustParsePrefix("ff02::1/128"),
		netip.MustParsePrefix("::ffff:192.0.2.7/64"),
	} {
		if got, err := checkPrefix(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("checkPrefix(%v) = %v, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestPrefixToAddr(t *testing.T) {
	a := prefixToAddr(netip.MustParsePrefix("192.0.2.1/24"))
	if a.IPNet.String() != "192.0.2.1/24" || a.Flags != 0 || len(a.IP) != 4 {
		t.Errorf("IPv4: %v flags %#x len %d; want host address kept, no flags, 4 bytes", a.IPNet, a.Flags, len(a.IP))
	}
	a = prefixToAddr(netip.MustParsePrefix("fd00::2/64"))
	if a.IPNet.String() != "fd00::2/64" || a.Flags&unix.IFA_F_NODAD == 0 {
		t.Errorf("IPv6: %v flags %#x; want fd00::2/64 with IFA_F_NODAD", a.IPNet, a.Flags)
	}
}

func TestValidNamespaceName(t *testing.T) {
	for _, ok := range []string{"rds-peer", "a", "ns.1"} {
		if err := validNamespaceName(ok); err != nil {
			t.Errorf("validNamespaceName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "../x", "x\x00"} {
		if err := validNamespaceName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("validNamespaceName(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := OpenNamespace("../etc"); !errors.Is(err, ErrInvalid) {
		t.Errorf("OpenNamespace(../etc) = %v, want ErrInvalid", err)
	}
}

func TestOpenNamespaceMissing(t *testing.T) {
	_, err := openNamespaceAt(t.TempDir(), "nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "network namespace nope not found") {
		t.Errorf("openNamespaceAt(missing) = %v", err)
	}
}

func TestOpenNamespaceNotNsfs(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/plain", ""); err != nil {
		t.Fatal(err)
	}
	_, err := openNamespaceAt(dir, "plain")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a namespace bind mount") {
		t.Errorf("openNamespaceAt(plain file) = %v, want ErrInvalid", err)
	}
}

func TestNetemAttrs(t *testing.T) {
	n := Netem{Loss: 1.5, Delay: 10 * time.Millisecond, Jitter: 2 * time.Millisecond, Duplicate: 3, Corrupt: 4, Reorder: 5, Limit: 77}
	want := netlink.NetemQdiscAttrs{Latency: 10000, Jitter: 2000, Loss: 1.5, Duplicate: 3, CorruptProb: 4, ReorderProb: 5, Limit: 77}
	if got := n.attrs(); got != want {
		t.Errorf("attrs() = %+v, want %+v", got, want)
	}
}

func TestValidRDMAName(t *testing.T) {
	for _, bad := range []string{"", "..", "rxe/0", "rxe 0", strings.Repeat("x", 64)} {
		if err := validRDMAName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("validRDMAName(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if err := validRDMAName("rxe0"); err != nil {
		t.Errorf("validRDMAName(rxe0) = %v", err)
	}
}
