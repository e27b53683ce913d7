package netlinkcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PortState is the state of an RDMA port (enum ib_port_state), as shown in
// /sys/class/infiniband/DEV/ports/N/state.
type PortState int

// RDMA port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

// String returns the kernel's name for the state ("ACTIVE").
func (s PortState) String() string {
	switch s {
	case PortNop:
		return "NOP"
	case PortDown:
		return "DOWN"
	case PortInit:
		return "INIT"
	case PortArmed:
		return "ARMED"
	case PortActive:
		return "ACTIVE"
	case PortActiveDefer:
		return "ACTIVE_DEFER"
	}
	return "PortState(" + strconv.Itoa(int(s)) + ")"
}

// ParsePortState parses the contents of a sysfs port state file, such as
// "4: ACTIVE\n". The number is authoritative; when a name follows it must
// match the number's name (unknown numbers accept any name).
func ParsePortState(s string) (PortState, error) {
	t := strings.TrimSpace(s)
	num, name, hasName := strings.Cut(t, ":")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 0 {
		return 0, invalidf("parse rdma port state %q: want \"N: NAME\" such as \"4: ACTIVE\"", s)
	}
	st := PortState(n)
	if hasName {
		name = strings.TrimSpace(name)
		if st <= PortActiveDefer && name != st.String() {
			return 0, invalidf("parse rdma port state %q: number %d is %s, not %q", s, n, st, name)
		}
	}
	return st, nil
}

// rxeParent reads rxe's "parent" attribute in devDir. ok reports whether
// the attribute exists, which identifies an rxe device.
func rxeParent(devDir string) (netdev string, ok bool) {
	b, err := os.ReadFile(filepath.Join(devDir, "parent"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// firstGIDNetdev returns the netdev of the first populated GID entry of
// port 1, which any RoCE device has; "" when none can be read.
func firstGIDNetdev(devDir string) string {
	dir := filepath.Join(devDir, "ports", "1", "gid_attrs", "ndevs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		// Unpopulated entries fail to read (EINVAL).
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
	}
	return ""
}

// readPortState reads a port state below ibClass (/sys/class/infiniband).
func readPortState(ibClass, name string, port int) (PortState, error) {
	if err := validRDMAName(name); err != nil {
		return 0, err
	}
	if port < 1 {
		return 0, invalidf("rdma device %s port %d: ports count from 1", name, port)
	}
	devDir := filepath.Join(ibClass, name)
	p := filepath.Join(devDir, "ports", strconv.Itoa(port), "state")
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, derr := os.Stat(devDir); derr != nil {
				return 0, newError([]error{ErrNotFound, err}, "rdma device %s not found (no %s; create it with AddRxe)", name, devDir)
			}
			return 0, newError([]error{ErrNotFound, err}, "rdma device %s has no port %d (no %s)", name, port, p)
		}
		return 0, newError([]error{err}, "read state of rdma device %s port %d: %v", name, port, err)
	}
	st, err := ParsePortState(string(b))
	if err != nil {
		return 0, fmt.Errorf("rdma device %s port %d (%s): %w", name, port, p, err)
	}
	return st, nil
}

// validRDMAName rejects names that cannot be an RDMA device.
func validRDMAName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) >= 64 || strings.ContainsAny(name, "/\x00 ") {
		return invalidf("rdma device name %q: want a short plain name such as \"rxe0\"", name)
	}
	return nil
}
