package netlinkcfg

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePortState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PortState
	}{
		{"4: ACTIVE\n", PortActive},
		{"1: DOWN\n", PortDown},
		{"2: INIT", PortInit},
		{"3: ARMED\n", PortArmed},
		{"5: ACTIVE_DEFER\n", PortActiveDefer},
		{"0: NOP\n", PortNop},
		{"4\n", PortActive},
		{"7: FUTURE\n", PortState(7)},
	} {
		got, err := ParsePortState(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParsePortState(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "ACTIVE", "4: DOWN\n", "x: ACTIVE", "-1: X", ": ACTIVE"} {
		if got, err := ParsePortState(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePortState(%q) = %v, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestPortStateString(t *testing.T) {
	for st, want := range map[PortState]string{
		PortNop: "NOP", PortDown: "DOWN", PortInit: "INIT", PortArmed: "ARMED",
		PortActive: "ACTIVE", PortActiveDefer: "ACTIVE_DEFER", PortState(9): "PortState(9)",
	} {
		if got := st.String(); got != want {
			t.Errorf("PortState(%d).String() = %q, want %q", int(st), got, want)
		}
	}
}

func TestReadPortStateFixture(t *testing.T) {
	ib := "testdata/vm61/sys/class/infiniband"
	for _, tc := range []struct {
		dev  string
		want PortState
	}{{"rxe0", PortActive}, {"rxe1", PortDown}, {"mlx5_0", PortActive}} {
		got, err := readPortState(ib, tc.dev, 1)
		if err != nil || got != tc.want {
			t.Errorf("readPortState(%s, 1) = %v, %v; want %v", tc.dev, got, err, tc.want)
		}
	}
	_, err := readPortState(ib, "rxe9", 1)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "rdma device rxe9 not found") {
		t.Errorf("missing device: %v", err)
	}
	_, err = readPortState(ib, "rxe0", 2)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "rdma device rxe0 has no port 2") {
		t.Errorf("missing port: %v", err)
	}
	for _, bad := range []struct {
		dev  string
		port int
	}{{"rxe0", 0}, {"../rxe0", 1}, {"", 1}} {
		if _, err := readPortState(ib, bad.dev, bad.port); !errors.Is(err, ErrInvalid) {
			t.Errorf("readPortState(%q, %d): %v, want ErrInvalid", bad.dev, bad.port, err)
		}
	}
}

func TestRxeSysfsFixture(t *testing.T) {
	ib := "testdata/vm61/sys/class/infiniband/"
	if nd, ok := rxeParent(ib + "rxe0"); !ok || nd != "veth0" {
		t.Errorf("rxeParent(rxe0) = %q, %v; want veth0, true", nd, ok)
	}
	if nd, ok := rxeParent(ib + "mlx5_0"); ok || nd != "" {
		t.Errorf("rxeParent(mlx5_0) = %q, %v; want \"\", false (not rxe)", nd, ok)
	}
	if nd := firstGIDNetdev(ib + "mlx5_0"); nd != "enp1s0f0np0" {
		t.Errorf("firstGIDNetdev(mlx5_0) = %q, want enp1s0f0np0", nd)
	}
	if nd := firstGIDNetdev(ib + "rxe1"); nd != "" {
		t.Errorf("firstGIDNetdev(rxe1) = %q, want \"\" (no gid table)", nd)
	}
}
