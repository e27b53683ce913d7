package netlinkcfg

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseProcModules(t *testing.T) {
	in := `rds_rdma 69632 0 - Live 0xffffffffc0a5f000
ib_core 491520 6 rds_rdma,rdma_cm,iw_cm,ib_cm,rdma_rxe,ib_uverbs, Live 0xffffffffc0918000
nvidia 56164352 2 nvidia_uvm, Live 0x0000000000000000 (POE)
rdma_rxe 159744 0 - Unloading 0x0000000000000000
rds 212992 0 - Loading 0x0000000000000000 (E)

`
	got, err := ParseProcModules(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"rds_rdma": true, "ib_core": true, "nvidia": true, "rds": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseProcModules = %v, want %v", got, want)
	}
}

func TestParseProcModulesErrors(t *testing.T) {
	for _, in := range []string{
		"rds 212992 0 -\n",                 // too few fields
		"rds 212992 0 - Dead 0x0\n",        // unknown state
		"ok 1 0 - Live 0x0\nbroken line\n", // second line broken
	} {
		_, err := ParseProcModules(strings.NewReader(in))
		if err == nil {
			t.Errorf("ParseProcModules(%q) succeeded, want an error", in)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "/proc/modules line") {
			t.Errorf("ParseProcModules(%q) error %q: want ErrInvalid naming the line", in, err)
		}
	}
}

func TestLoadedModulesFixture(t *testing.T) {
	got, err := loadedModulesAt("testdata/vm61/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"rds", "rds_tcp", "rds_rdma", "rdma_rxe", "crc32_generic", "veth", "ib_core"} {
		if !got[m] {
			t.Errorf("module %s not reported loaded", m)
		}
	}
	if len(got) != 14 {
		t.Errorf("got %d modules, want the fixture's 14", len(got))
	}

	_, err = loadedModulesAt("testdata/host/proc")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no loadable module support") {
		t.Errorf("missing /proc/modules: error %v, want ErrNotFound explaining it", err)
	}
}

// A kernel that ships crc32_generic but has not loaded it, and whose
// /proc/crypto offers no crc32, lacks what its rxe needs; unreadable module
// lists leave the requirement standing too.
func TestCRC32Shipped(t *testing.T) {
	proc := filepath.Join("testdata", "partial", "proc")
	if !shipsNo(filepath.Join("testdata", "vm72", "proc"), []string{filepath.Join("testdata", "vm72", "lib", "modules")}, ModuleCRC32Generic) {
		t.Error("vm72 ships no crc32_generic, shipsNo said it does")
	}
	if shipsNo(proc, []string{filepath.Join("testdata", "partial", "lib", "modules")}, ModuleCRC32Generic) {
		t.Error("partial (6.1) ships crc32_generic in modules.dep, shipsNo said it does not")
	}
	if shipsNo(proc, []string{filepath.Join("testdata", "nonexistent")}, ModuleCRC32Generic) {
		t.Error("shipsNo with no readable module list said the kernel ships no crc32_generic")
	}
	st, err := rdsModulesAt(proc, filepath.Join("testdata", "partial", "sys"), filepath.Join("testdata", "partial", "lib", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	if st.CRC32 {
		t.Error("partial: crc32_generic shipped but not loaded, and no crc32 in /proc/crypto: CRC32 should be false")
	}
}

func TestRDSModulesFixtures(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want ModuleStatus
	}{
		{"vm61", ModuleStatus{RDS: true, RDSTCP: true, RDSRDMA: true, RdmaRxe: true, CRC32: true, Veth: true}},
		// rdma_rxe is unloading; veth is only visible in /sys/module.
		{"partial", ModuleStatus{RDS: true, RDSTCP: true, Veth: true}},
		// No /proc/modules at all: not an error, nothing is loaded.
		{"host", ModuleStatus{}},
		// 7.2: no crc32_generic loaded, none shipped (crc32 is built in),
		// and /proc/crypto has no crc32: rxe needs nothing more.
		{"vm72", ModuleStatus{RDS: true, RDSTCP: true, RDSRDMA: true, RdmaRxe: true, CRC32: true, Veth: true}},
	} {
		dir := filepath.Join("testdata", tc.dir)
		got, err := rdsModulesAt(filepath.Join(dir, "proc"), filepath.Join(dir, "sys"), filepath.Join(dir, "lib", "modules"))
		if err != nil {
			t.Errorf("%s: %v", tc.dir, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: status %+v, want %+v", tc.dir, got, tc.want)
		}
	}
}

func TestCryptoHas(t *testing.T) {
	if !cryptoHas("testdata/vm61/proc/crypto", "crc32") {
		t.Error("crc32 not found in vm61 /proc/crypto")
	}
	if cryptoHas("testdata/host/proc/crypto", "crc32") {
		t.Error("crc32 found in host /proc/crypto, which only has crc32c")
	}
	if cryptoHas("testdata/nonexistent", "crc32") {
		t.Error("crc32 found in a missing file")
	}
}

func TestModuleStatusMissing(t *testing.T) {
	all := ModuleStatus{RDS: true, RDSTCP: true, RDSRDMA: true, RdmaRxe: true, CRC32: true, Veth: true}
	for _, tr := range []string{"", TransportTCP, TransportIB, "rdma", TransportRxe} {
		if err := all.Missing(tr); err != nil {
			t.Errorf("all loaded, Missing(%q) = %v", tr, err)
		}
	}
	for _, tc := range []struct {
		st        ModuleStatus
		transport string
		want      string
	}{
		{ModuleStatus{}, "", "RDS needs rds, which is not loaded (modprobe -a rds)"},
		{ModuleStatus{RDS: true}, TransportTCP, "RDS transport tcp needs rds_tcp, which is not loaded (modprobe -a rds_tcp)"},
		{ModuleStatus{}, TransportTCP, "RDS transport tcp needs rds, rds_tcp, which are not loaded (modprobe -a rds rds_tcp)"},
		{ModuleStatus{RDS: true, RDSTCP: true}, TransportIB, "RDS transport ib needs rds_rdma, which is not loaded (modprobe -a rds_rdma)"},
		{ModuleStatus{RDS: true, RDSRDMA: true}, TransportRxe, "RDS transport rxe needs rdma_rxe, crc32_generic, which are not loaded (modprobe -a rdma_rxe crc32_generic)"},
		{ModuleStatus{RDS: true, RDSRDMA: true, RdmaRxe: true}, TransportRxe, "RDS transport rxe needs crc32_generic, which is not loaded (modprobe -a crc32_generic)"},
	} {
		err := tc.st.Missing(tc.transport)
		if err == nil {
			t.Errorf("%+v.Missing(%q) = nil, want %q", tc.st, tc.transport, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%+v.Missing(%q) = %q, want %q", tc.st, tc.transport, err, tc.want)
		}
		if !errors.Is(err, ErrModuleNotLoaded) {
			t.Errorf("%+v.Missing(%q) does not match ErrModuleNotLoaded", tc.st, tc.transport)
		}
	}
	if err := all.Missing("udp"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Missing(\"udp\") = %v, want ErrInvalid", err)
	}
}
