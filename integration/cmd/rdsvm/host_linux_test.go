package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/internal/kernel"
)

func TestPickTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		cfg  pkgConfig
		args []string
		want time.Duration
	}{
		{"default", "", pkgConfig{}, nil, defaultTimeout},
		{"test.timeout plus margin", "", pkgConfig{}, []string{"-test.v", "-test.timeout=10m0s"}, 12 * time.Minute},
		{"test.timeout separate", "", pkgConfig{}, []string{"-test.timeout", "30s"}, 30*time.Second + 2*time.Minute},
		{"test.timeout zero means none", "", pkgConfig{}, []string{"-test.timeout=0s"}, defaultTimeout},
		{"rdsvm.json", "", pkgConfig{Timeout: "3m"}, []string{"-test.timeout=10m"}, 3 * time.Minute},
		{"env wins", "45s", pkgConfig{Timeout: "3m"}, []string{"-test.timeout=10m"}, 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RDSVM_TIMEOUT", tc.env)
			got, err := pickTimeout(tc.cfg, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("pickTimeout = %v, want %v", got, tc.want)
			}
		})
	}
	t.Setenv("RDSVM_TIMEOUT", "soon")
	if _, err := pickTimeout(pkgConfig{}, nil); err == nil {
		t.Fatal("bad RDSVM_TIMEOUT accepted")
	}
}

func TestReadPkgConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg, err := readPkgConfig()
	if err != nil || cfg.VMs != 1 {
		t.Fatalf("no rdsvm.json: %+v, %v; want one VM", cfg, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "rdsvm.json"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"vms": 2, "memory_mib": 768, "timeout": "5m"}`)
	cfg, err = readPkgConfig()
	if err != nil || cfg.VMs != 2 || cfg.MemoryMiB != 768 || cfg.Timeout != "5m" {
		t.Fatalf("got %+v, %v", cfg, err)
	}
	for _, bad := range []string{`{"vms": 3}`, `{"vm": 2}`, `not json`} {
		write(bad)
		if _, err := readPkgConfig(); err == nil || !strings.Contains(err.Error(), "rdsvm.json") {
			t.Errorf("rdsvm.json %s: error %v, want one naming rdsvm.json", bad, err)
		}
	}
}

func TestPassEnv(t *testing.T) {
	t.Setenv("RDSTEST_SEED", "7")
	t.Setenv("GOTRACEBACK", "all")
	t.Setenv("MY_VAR", "x")
	t.Setenv("OTHER_VAR", "y")
	t.Setenv("RDSVM_PASSENV", "MY_VAR")
	env := passEnv()
	for _, want := range []string{"RDSTEST_SEED=7", "GOTRACEBACK=all", "MY_VAR=x"} {
		if !slices.Contains(env, want) {
			t.Errorf("passEnv lacks %s: %q", want, env)
		}
	}
	if slices.Contains(env, "OTHER_VAR=y") {
		t.Errorf("passEnv passes OTHER_VAR: %q", env)
	}
}

func TestFreeUDPPorts(t *testing.T) {
	p, err := freeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 || p[0] == p[1] || p[0] == 0 {
		t.Fatalf("freeUDPPorts = %v", p)
	}
}

// fakeQemu is a stand-in for qemu-system-x86_64. It finds the console
// log and the status port among its arguments and behaves as $FAKE_<role>
// says, role being main or peer: "crash" writes a kernel panic to the
// console before the guest is ready; "crash-once" does that only on its
// first run (counted in $FAKE_DIR); "late-crash" says ready and then
// panics; "ok" says ready and exits 0; "hang" says ready and sleeps;
// "stall" never says ready; "stall-once" does that only on its first run;
// "slow" says ready and exits 0 after 2 s.
const fakeQemu = `#!/bin/sh
console=""
role=main
while [ $# -gt 0 ]; do
	case "$1" in
	-serial) case "$2" in file:/dev/fd/*) ;; file:*) [ -z "$console" ] && console="${2#file:}";; esac; shift;;
	-append) case "$2" in *rdsvm.role=peer*) role=peer;; esac; shift;;
	esac
	shift
done
eval mode=\$FAKE_$role
runs="$FAKE_DIR/runs-$role"
echo x >> "$runs"
if [ "$mode" = crash-once ]; then
	if [ "$(wc -l < "$runs")" -eq 1 ]; then mode=crash; else mode=ok; fi
fi
if [ "$mode" = stall-once ]; then
	if [ "$(wc -l < "$runs")" -eq 1 ]; then mode=stall; else mode=ok; fi
fi
case "$mode" in
crash) printf '[    0.98] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n[    0.99] Kernel panic - not syncing: Fatal exception in interrupt\n' > "$console"; exit 0;;
late-crash) echo "rdsvm-ready 1.0" >&4; printf 'Kernel panic - not syncing: later\n' > "$console"; exit 0;;
ok) echo booted > "$console"; echo "rdsvm-ready 1.0" >&4; echo "test output" >&3; echo "rdsvm-exit 0" >&4; exit 0;;
hang) echo booted > "$console"; echo "rdsvm-ready 1.0" >&4; exec sleep 30;;
stall) echo "rcu: INFO: rcu_preempt detected stalls" > "$console"; exec sleep 30;;
slow) echo booted > "$console"; echo "rdsvm-ready 1.0" >&4; sleep 2; echo "rdsvm-exit 0" >&4; exit 0;;
esac
exit 3
`

func TestBootWithRetries(t *testing.T) {
	dir := t.TempDir()
	qemu := filepath.Join(dir, "qemu")
	if err := os.WriteFile(qemu, []byte(fakeQemu), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RDSVM_QEMU", qemu)
	t.Setenv("FAKE_DIR", dir)
	k := &kernel.Kernel{Release: "fake", Root: dir}
	defer func(d time.Duration) { bootLimit = d }(bootLimit)
	bootLimit = time.Second
	runs := func(role string) int {
		b, _ := os.ReadFile(filepath.Join(dir, "runs-"+role))
		return strings.Count(string(b), "\n")
	}
	for _, tc := range []struct {
		name       string
		n          int
		main, peer string
		runs       int  // boots of the VM that crashes (main in one-VM runs)
		exit       int  // main's exit code at the end, -1 for none
		peerGone   bool // main stopped because the peer crashed
	}{
		{"one VM crashes once", 1, "crash-once", "", 2, 0, false},
		{"one VM always crashes", 1, "crash", "", bootAttempts, -1, false},
		{"crash after ready is not retried", 1, "late-crash", "", 1, -1, false},
		{"test failure is not retried", 1, "fail", "", 1, -1, false},
		{"peer crash stops a running main", 2, "hang", "crash", bootAttempts, -1, true},
		{"peer crashes once", 2, "ok", "crash-once", 2, 0, false},
		{"a stalled boot is stopped and booted again", 1, "stall-once", "", 2, 0, false},
		{"a boot that always stalls", 1, "stall", "", bootAttempts, -1, false},
		{"a test running past bootLimit is not stopped", 1, "slow", "", 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []string{"main", "peer"} {
				os.Remove(filepath.Join(dir, "runs-"+r))
			}
			t.Setenv("FAKE_main", tc.main)
			t.Setenv("FAKE_peer", tc.peer)
			var ports []int
			if tc.n == 2 {
				ports = []int{1, 2}
			}
			logs := t.TempDir()
			var out strings.Builder
			start := time.Now()
			vms := bootWithRetries(context.Background(), func() []*vm {
				return newVMs(tc.n, k, "initrd", 128, ports, logs, "t", &lineWriter{w: &out})
			}, time.Minute, func() bool { return false })
			// In two-VM runs the peer crashes; main may be stopped
			// before its first line runs, so its boots are not counted.
			role := "main"
			if tc.n == 2 {
				role = "peer"
			}
			if got := runs(role); got != tc.runs {
				t.Errorf("%s booted %d times, want %d", role, got, tc.runs)
			}
			if vms[0].exitCode != tc.exit {
				t.Errorf("main exit code %d, want %d", vms[0].exitCode, tc.exit)
			}
			if got := vms[0].partnerCrashed.Load(); got != tc.peerGone {
				t.Errorf("main stopped for a crashed peer: %v, want %v", got, tc.peerGone)
			}
			if tc.peerGone && time.Since(start) > 20*time.Second {
				t.Errorf("took %v: the running main was not stopped when the peer crashed", time.Since(start))
			}
			kept, _ := filepath.Glob(filepath.Join(logs, "*.boot-crash-*.console.log"))
			wantKept := 0
			switch {
			case tc.main == "crash-once" || tc.peer == "crash-once" || tc.main == "stall-once":
				wantKept = 1
			case tc.main == "crash" || tc.peer == "crash" || tc.main == "stall":
				wantKept = bootAttempts - 1
			}
			if len(kept) != wantKept {
				t.Errorf("kept %d crashed consoles (%q), want %d", len(kept), kept, wantKept)
			}
		})
	}
}

func TestSelectModules(t *testing.T) {
	const dep = "kernel/net/rds/rds.ko.xz:\nkernel/lib/crc32_generic.ko.xz:\n"
	mk := func(builtin string) *kernel.ModuleDB {
		db, err := kernel.NewModuleDB(strings.NewReader(dep), []byte(builtin))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	names := []string{"rds", "crc32_generic", "virtio_pci"}
	// 6.1 and 6.12: crc32_generic is a module and is loaded.
	if got := selectModules(mk("kernel/drivers/virtio/virtio_pci.ko\n"), names); !slices.Equal(got, names) {
		t.Fatalf("with a crc32_generic module: %q", got)
	}
	// 7.2: no crc32_generic at all, crc32 built in.
	db, err := kernel.NewModuleDB(strings.NewReader("kernel/net/rds/rds.ko.xz:\n"),
		[]byte("kernel/lib/crc/crc32.ko\nkernel/drivers/virtio/virtio_pci.ko\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := selectModules(db, names)
	if want := []string{"rds", "virtio_pci"}; !slices.Equal(got, want) {
		t.Fatalf("with crc32 built in: %q, want %q", got, want)
	}
	if files, err := db.Closure(got); err != nil || !slices.Equal(files, []string{"kernel/net/rds/rds.ko.xz"}) {
		t.Fatalf("Closure = %q, %v", files, err)
	}
	// Neither: crc32_generic stays, and Closure names it.
	db, _ = kernel.NewModuleDB(strings.NewReader("kernel/net/rds/rds.ko.xz:\n"), nil)
	if _, err := db.Closure(selectModules(db, names)); err == nil || !strings.Contains(err.Error(), "crc32_generic") {
		t.Fatalf("without crc32 at all: %v, want an error naming crc32_generic", err)
	}
}

// TestDescribePanic: a panic is named with its oops and the function the
// oops happened in; a console without a panic names nothing.
func TestDescribePanic(t *testing.T) {
	console := []byte(`[   90.199772] Oops: divide error: 0000 [#1] SMP NOPTI
[   90.201049] RIP: 0010:rds_queue_reconnect+0xd9/0x1a0 [rds]
[   90.235145] RIP: 0010:other_function+0x1/0x2
[   90.284429] Kernel panic - not syncing: Fatal exception
`)
	want := "Kernel panic - not syncing: Fatal exception (Oops: divide error in rds_queue_reconnect)"
	if got := describePanic(console); got != want {
		t.Errorf("describePanic = %q, want %q", got, want)
	}
	if got := describePanic([]byte("[ 1.0] Oops: int3: 0000\n[ 1.1] RIP: 0010:foo+0x1\n")); got != "" {
		t.Errorf("describePanic without a panic = %q, want \"\"", got)
	}
	if got := describePanic([]byte("Kernel panic - not syncing: VFS: Unable to mount root fs\n")); got != "Kernel panic - not syncing: VFS: Unable to mount root fs" {
		t.Errorf("describePanic without an oops = %q", got)
	}
}
