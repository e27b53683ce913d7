package netlinkcfg

import (
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
