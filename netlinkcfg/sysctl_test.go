package netlinkcfg

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSysctlPath(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"net.ipv4.conf.all.rp_filter", "/proc/sys/net/ipv4/conf/all/rp_filter"},
		{"net.ipv4.conf.all.accept_local", "/proc/sys/net/ipv4/conf/all/accept_local"},
		{"net.ipv6.conf.veth0.disable_ipv6", "/proc/sys/net/ipv6/conf/veth0/disable_ipv6"},
		{"net/ipv4/conf/eth0.100/rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"},
		{"net.rds.tcp.rds_tcp_rcvbuf", "/proc/sys/net/rds/tcp/rds_tcp_rcvbuf"},
	} {
		got, err := sysctlPath("/proc/sys", tc.key)
		if err != nil {
			t.Errorf("sysctlPath(%q): %v", tc.key, err)
			continue
		}
		if got != tc.want {
			t.Errorf("sysctlPath(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestSysctlPathRejects(t *testing.T) {
	for _, key := range []string{
		"", "net", "/net/ipv4/ip_forward", "net/../../etc/passwd", "net.ipv4..ip_forward",
		"net/ipv4/../../../etc/shadow", "net.ipv4.", ".net.ipv4.ip_forward", "kernel.hostname",
		"vm.swappiness", "net/./ipv4", "net.ipv4\x00.x", "net/ipv4/conf/all/",
	} {
		p, err := sysctlPath("/proc/sys", key)
		if err == nil {
			t.Errorf("sysctlPath(%q) = %q, want an error", key, p)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("sysctlPath(%q) error %v does not match ErrInvalid", key, err)
		}
	}
}

func TestRDSSysctlKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"ping_enable", "net.rds.ping_enable"},
		{"tcp.rds_tcp_rcvbuf", "net.rds.tcp.rds_tcp_rcvbuf"},
		{"net.rds.ping_enable", "net.rds.ping_enable"},
		{"ib.max_recv_wr", "net.rds.ib.max_recv_wr"},
	} {
		got, err := rdsSysctlKey(tc.key)
		if err != nil || got != tc.want {
			t.Errorf("rdsSysctlKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	for _, key := range []string{"", "/ping_enable", "../ipv4/ip_forward", "tcp/rds_tcp_rcvbuf", ".ping_enable", "net.rds.", "tcp..x", "tcp.."} {
		k, err := rdsSysctlKey(key)
		if err == nil {
			// The key mapper may pass a key the path check rejects;
			// together they must refuse it.
			_, err = sysctlPath("/proc/sys", k)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("rds sysctl key %q accepted (%v), want ErrInvalid", key, err)
		}
	}
}

func TestReadSysctlFixture(t *testing.T) {
	root := "testdata/vm61/proc/sys"
	for _, tc := range []struct{ key, want string }{
		{"net.rds.ping_enable", "1"},
		{"net.rds.tcp.rds_tcp_rcvbuf", "0"},
		{"net.ipv4.conf.all.rp_filter", "0"},
		{"net/ipv4/conf/eth0.100/rp_filter", "2"},
	} {
		got, err := readSysctl(root, tc.key)
		if err != nil || got != tc.want {
			t.Errorf("readSysctl(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
}

func TestSysctlMissingHints(t *testing.T) {
	for _, tc := range []struct{ key, hint string }{
		{"net.rds.ping_enable", "rds is not loaded in this kernel (modprobe rds)"},
		{"net.rds.tcp.rds_tcp_sndbuf", "rds_tcp is not loaded in this kernel (modprobe rds_tcp)"},
		{"net.rds.ib.max_recv_wr", "rds_rdma is not loaded in this kernel (modprobe rds_rdma)"},
		{"net.ipv4.conf.veth9.rp_filter", "check the key, or the interface name it contains"},
	} {
		_, err := readSysctl("testdata/host/proc/sys", tc.key)
		if err == nil {
			t.Errorf("readSysctl(%q) on the host fixture succeeded", tc.key)
			continue
		}
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("readSysctl(%q) error %v: want ErrNotFound and fs.ErrNotExist", tc.key, err)
		}
		if !strings.Contains(err.Error(), tc.hint) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("readSysctl(%q) error %q: want the key and %q", tc.key, err, tc.hint)
		}
	}
}

func TestWriteSysctl(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "net", "ipv4", "conf", "all")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rp_filter"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSysctl(root, "net.ipv4.conf.all.rp_filter", "0"); err != nil {
		t.Fatal(err)
	}
	if got, err := readSysctl(root, "net.ipv4.conf.all.rp_filter"); err != nil || got != "0" {
		t.Errorf("after write: %q, %v; want \"0\"", got, err)
	}

	// A missing sysctl must not be created as a file.
	err := writeSysctl(root, "net.ipv4.conf.all.accept_local", "1")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("write of a missing sysctl: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "accept_local")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write of a missing sysctl created a file (stat: %v)", err)
	}
	if err := writeSysctl(root, "net.ipv4.conf.all.rp_filter", "1\n2"); !errors.Is(err, ErrInvalid) {
		t.Errorf("value with a newline: %v, want ErrInvalid", err)
	}
	if err := writeSysctl(root, "net.ipv4.conf.all/../../x", "1"); !errors.Is(err, ErrInvalid) {
		t.Errorf("key with ..: %v, want ErrInvalid", err)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
