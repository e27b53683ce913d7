//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanVMJobs(t *testing.T) {
	defer func(run, raceRun string, race bool) { *flagRun, *flagRaceRun, *flagRace = run, raceRun, race }(*flagRun, *flagRaceRun, *flagRace)
	*flagRun, *flagRaceRun, *flagRace = "", "^TestRDMA$", true
	pkgs := integrationPkgs{
		plain:    []string{modulePath + "/integration", modulePath + "/netlinkcfg"},
		race:     []string{modulePath + "/integration/concurrency", modulePath + "/integration/rdmafaults"},
		needRace: []string{modulePath + "/integration/concurrency"},
	}
	jobs, left := planVMJobs([]string{"6.1", "6.12"}, pkgs, true)
	if len(left) != 0 {
		t.Errorf("left out %q, want nothing (no package names kernels)", left)
	}
	got := map[string]bool{}
	for _, j := range jobs {
		got[fmt.Sprintf("%s %s race=%v run=%s", j.kernel, shortPkg(j.pkg), j.race, j.run)] = true
	}
	want := []string{
		"6.1 ./integration race=false run=",
		"6.1 ./netlinkcfg race=false run=",
		"6.1 ./integration/concurrency race=true run=",
		"6.1 ./integration/rdmafaults race=true run=",
		"6.1 ./integration race=true run=^TestRDMA$",
		"6.12 ./integration race=false run=",
		"6.12 ./netlinkcfg race=false run=",
		"6.12 ./integration/concurrency race=true run=", // its rdsvm.json asks for -race everywhere
		"6.12 ./integration/rdmafaults race=false run=",
	}
	if len(jobs) != len(want) {
		t.Errorf("%d jobs, want %d: %v", len(jobs), len(want), got)
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no job %q in %v", w, got)
		}
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].expected() > jobs[i-1].expected() {
			t.Errorf("job %d (%s, %ds) runs after a shorter one (%s, %ds)", i, jobs[i].pkg, jobs[i].expected(), jobs[i-1].pkg, jobs[i-1].expected())
		}
	}
	if jobs[0].kernel != "6.1" || jobs[0].pkg != modulePath+"/integration" || jobs[0].race {
		t.Errorf("first job %+v, want package integration on 6.1 (the longest)", jobs[0])
	}
}

func TestPlanVMJobsKernelList(t *testing.T) {
	defer func(run, raceRun string, race bool) { *flagRun, *flagRaceRun, *flagRace = run, raceRun, race }(*flagRun, *flagRaceRun, *flagRace)
	*flagRun, *flagRaceRun, *flagRace = "", "", true
	pkgs := integrationPkgs{
		plain:    []string{modulePath + "/integration", modulePath + "/integration/reliability"},
		race:     []string{modulePath + "/integration/concurrency"},
		needRace: []string{modulePath + "/integration/concurrency"},
		kernels: map[string][]string{
			modulePath + "/integration/reliability": {"6.1", "6.12"},
			modulePath + "/integration/concurrency": {"6.12"},
		},
	}
	kernels := []string{"6.1", "6.12", "sid"}
	jobs, left := planVMJobs(kernels, pkgs, true)
	var got []string
	for _, j := range jobs {
		got = append(got, fmt.Sprintf("%s %s", j.kernel, shortPkg(j.pkg)))
	}
	want := []string{"6.1 ./integration", "6.1 ./integration/reliability", "6.12 ./integration", "6.12 ./integration/reliability", "6.12 ./integration/concurrency", "sid ./integration"}
	if !sameSet(got, want) {
		t.Errorf("default kernel list: jobs %q, want %q", got, want)
	}
	if wantLeft := []string{"./integration/concurrency on 6.1", "./integration/reliability on sid", "./integration/concurrency on sid"}; !sameSet(left, wantLeft) {
		t.Errorf("left out %q, want %q", left, wantLeft)
	}
	// Kernels named on the command line run every package.
	jobs, left = planVMJobs(kernels, pkgs, false)
	if len(jobs) != 9 || len(left) != 0 {
		t.Errorf("chosen kernels: %d jobs, left out %q; want all 9 and none left out", len(jobs), left)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}

func TestReadPkgConfig(t *testing.T) {
	dir := t.TempDir()
	if cfg, err := readPkgConfig(dir); err != nil || cfg.Race || cfg.Kernels != nil {
		t.Errorf("no rdsvm.json: %+v, %v; want the zero config", cfg, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "rdsvm.json"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"race": true, "kernels": ["6.1", "6.12"], "vms": 2}`)
	if cfg, err := readPkgConfig(dir); err != nil || !cfg.Race || !sameSet(cfg.Kernels, []string{"6.1", "6.12"}) {
		t.Errorf("race and kernels: %+v, %v", cfg, err)
	}
	write(`{"kernels": ["6.1", "7.2"]}`)
	if _, err := readPkgConfig(dir); err == nil || !strings.Contains(err.Error(), `"7.2"`) {
		t.Errorf("unknown kernel: %v, want an error naming it", err)
	}
}
