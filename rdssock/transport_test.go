package rdssock

import "testing"

func TestTransportKernelValues(t *testing.T) {
	tests := []struct {
		kernel int32
		want   Transport
		name   string
	}{
		{0, TransportIB, "infiniband"},
		{1, TransportIWARP, "iwarp"},
		{2, TransportTCP, "tcp"},
		{3, TransportLoop, "loopback"},
		{-1, TransportNone, "none"},
		{7, unknownTransportBase + 7, "kernel-transport-7"},
	}
	for _, tt := range tests {
		got := transportFromKernel(tt.kernel)
		if got != tt.want || got.String() != tt.name {
			t.Errorf("transportFromKernel(%d) = %v (%q), want %v (%q)", tt.kernel, int(got), got, int(tt.want), tt.name)
		}
	}
	for _, tt := range []struct {
		t    Transport
		v    int
		ok   bool
		name string
	}{
		{TransportIB, 0, true, "rds_rdma"},
		{TransportTCP, 2, true, "rds_tcp"},
		{TransportAuto, 0, false, "rds"},
		{TransportLoop, 0, false, "rds"},
		{TransportNone, 0, false, ""},
	} {
		v, ok := tt.t.Kernel()
		if v != tt.v || ok != tt.ok || tt.t.Module() != tt.name {
			t.Errorf("%v: Kernel() = %d, %v; Module() = %q; want %d, %v, %q", tt.t, v, ok, tt.t.Module(), tt.v, tt.ok, tt.name)
		}
	}
}
