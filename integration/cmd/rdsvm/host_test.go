package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
