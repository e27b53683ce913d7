package netlinkcfg

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// sysctlPath maps a sysctl key under net to its file below procSys
// (normally /proc/sys). The key is written like sysctl(8) does: either with
// dots ("net.ipv4.conf.all.rp_filter") or, when a component itself
// contains dots (an interface such as "eth0.100"), with slashes
// ("net/ipv4/conf/eth0.100/rp_filter"). Keys must start with "net"; empty,
// "." and ".." components, leading or trailing separators and NUL bytes are
// rejected.
func sysctlPath(procSys, key string) (string, error) {
	if key == "" {
		return "", invalidf("sysctl key is empty")
	}
	if strings.ContainsRune(key, 0) {
		return "", invalidf("sysctl key %q contains a NUL byte", key)
	}
	sep := "."
	if strings.Contains(key, "/") {
		sep = "/"
	}
	parts := strings.Split(key, sep)
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", invalidf("sysctl key %q: empty, \".\" or \"..\" component (write keys like net.ipv4.conf.all.rp_filter)", key)
		}
	}
	if parts[0] != "net" {
		return "", invalidf("sysctl key %q is not under net (this package only touches net.*)", key)
	}
	if len(parts) < 2 {
		return "", invalidf("sysctl key %q names the whole net tree, not a value", key)
	}
	return filepath.Join(append([]string{procSys}, parts...)...), nil
}

// rdsSysctlKey turns an RDS sysctl key ("ping_enable", "tcp.rds_tcp_rcvbuf",
// optionally with a "net.rds." prefix) into the full net.* key.
func rdsSysctlKey(key string) (string, error) {
	k := strings.TrimPrefix(key, "net.rds.")
	if k == "" || strings.HasPrefix(k, "/") || strings.HasPrefix(k, ".") {
		return "", invalidf("rds sysctl key %q: want a name under net.rds such as ping_enable or tcp.rds_tcp_rcvbuf", key)
	}
	if strings.Contains(k, "/") {
		return "", invalidf("rds sysctl key %q: use dots, not slashes (tcp.rds_tcp_rcvbuf)", key)
	}
	return "net.rds." + k, nil
}

// Sysctl reads a net.* sysctl of the calling thread's network namespace,
// for example "net.ipv4.conf.all.rp_filter", and returns its value without
// the trailing newline. Use Namespace.Do to read another namespace's value.
func Sysctl(key string) (string, error) { return readSysctl("/proc/sys", key) }

// SetSysctl writes a net.* sysctl of the calling thread's network
// namespace; see Sysctl for the key syntax.
func SetSysctl(key, value string) error { return writeSysctl("/proc/sys", key, value) }

// RDSSysctl reads net.rds.KEY, where key is written relative to net.rds:
// "ping_enable", "tcp.rds_tcp_rcvbuf" (a "net.rds." prefix is accepted).
func RDSSysctl(key string) (string, error) {
	k, err := rdsSysctlKey(key)
	if err != nil {
		return "", err
	}
	return readSysctl("/proc/sys", k)
}

// SetRDSSysctl writes net.rds.KEY; see RDSSysctl.
func SetRDSSysctl(key, value string) error {
	k, err := rdsSysctlKey(key)
	if err != nil {
		return err
	}
	return writeSysctl("/proc/sys", k, value)
}

func readSysctl(procSys, key string) (string, error) {
	p, err := sysctlPath(procSys, key)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", sysctlError("read", key, p, err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

func writeSysctl(procSys, key, value string) error {
	p, err := sysctlPath(procSys, key)
	if err != nil {
		return err
	}
	if strings.ContainsAny(value, "\n\x00") {
		return invalidf("sysctl %s: value %q contains a newline or NUL byte", key, value)
	}
	// O_WRONLY without O_CREATE: a missing sysctl must not become a file.
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return sysctlError("write", key, p, err)
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return sysctlError("write", key, p, err)
	}
	if err := f.Close(); err != nil {
		return sysctlError("write", key, p, err)
	}
	return nil
}

// sysctlError explains a failed sysctl access, naming the module that
// provides the key when it is missing.
func sysctlError(op, key, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		hint := "check the key, or the interface name it contains"
		switch {
		case strings.HasPrefix(key, "net.rds.tcp."):
			hint = "rds_tcp is not loaded in this kernel (modprobe rds_tcp)"
		case strings.HasPrefix(key, "net.rds.ib."):
			hint = "rds_rdma is not loaded in this kernel (modprobe rds_rdma)"
		case strings.HasPrefix(key, "net.rds."):
			hint = "rds is not loaded in this kernel (modprobe rds)"
		}
		return newError([]error{ErrNotFound, err}, "%s sysctl %s: %s does not exist: %s", op, key, path, hint)
	}
	if errors.Is(err, fs.ErrPermission) {
		return newError([]error{err}, "%s sysctl %s: permission denied on %s (needs root / CAP_NET_ADMIN in the namespace's user namespace)", op, key, path)
	}
	return newError([]error{err}, "%s sysctl %s (%s): %v", op, key, path, err)
}
