//go:build linux

package main

import (
	"fmt"
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
	jobs := planVMJobs([]string{"6.1", "6.12"}, pkgs)
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
