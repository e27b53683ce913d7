//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-rds/rds/integration/internal/kernel"
)

// vmJob is one go test run of one integration package on one kernel.
type vmJob struct {
	kernel string // as asked for: an alias or a package name
	pkg    string
	race   bool
	run    string // -run pattern; "" for all tests
}

// expectedSeconds is roughly how long each package's VM run takes under
// TCG (plain build, boot included), from CI runs in November 2026. It
// only orders the jobs, longest first, so that the run does not end with
// one long package alone; a package not listed counts as short. The
// two-VM packages are listed by what they cost (two VMs), not by their
// wall time.
var expectedSeconds = map[string]int{
	modulePath + "/integration":              150,
	modulePath + "/integration/reliability":  150,
	modulePath + "/cmd/rdscat":               110,
	modulePath + "/examples/rdmawrite":       65,
	modulePath + "/integration/rdmafaults":   60,
	modulePath + "/integration/concurrency":  55,
	modulePath + "/integration/twovmrdma":    60,
	modulePath + "/integration/twovmfaults":  55,
	modulePath + "/integration/twovmhostile": 50,
	modulePath + "/integration/twovm":        35,
	modulePath + "/rdssock":                  35,
}

const modulePath = "github.com/go-rds/rds"

func (j vmJob) expected() int {
	s, ok := expectedSeconds[j.pkg]
	if !ok {
		s = 15
	}
	if j.run != "" {
		s /= 2 // a subset of the package's tests
	}
	if j.race {
		s = s * 3 / 2
	}
	return s
}

// vmOnly limits the VM runs of packages whose other tests need no kernel
// (the host unit tests run them, plain and with -race) to their
// integration tests (and examples), without a second run of the unit
// tests under TCG. rdscat's TestScripts are its host scripts: help and
// usage errors, which no kernel changes. cmsg and barrier have no VM run
// at all: their examples and tests touch no socket.
var vmOnly = map[string]string{
	modulePath + "/rdssock":    "^(TestIntegration|Example)",
	modulePath + "/cmd/rdscat": "^(TestIntegration|TestRdscat)",
}

// planVMJobs lists the integration runs: every package on every kernel,
// the race packages built with -race on the first kernel only (a data
// race is this module's, whatever the kernel; on the others they run as
// plain builds, faster under TCG) except those whose rdsvm.json asks for
// -race everywhere, and with -race-run the named tests of package
// integration a second time under -race on the first kernel. With
// restrict (the default kernel list), a package whose rdsvm.json names
// kernels runs on those only; the runs left out are returned as
// "package on kernel" lines.
func planVMJobs(kernels []string, pkgs integrationPkgs, restrict bool) (jobs []vmJob, left []string) {
	run := func(p string) string {
		if *flagRun == "" {
			return vmOnly[p]
		}
		return *flagRun
	}
	runsOn := func(p, k string) bool {
		only := pkgs.kernels[p]
		if !restrict || len(only) == 0 || slices.Contains(only, k) {
			return true
		}
		left = append(left, shortPkg(p)+" on "+k)
		return false
	}
	for ki, k := range kernels {
		first := ki == 0
		for _, p := range pkgs.plain {
			if runsOn(p, k) {
				jobs = append(jobs, vmJob{kernel: k, pkg: p, run: run(p)})
			}
		}
		for _, p := range pkgs.race {
			if !runsOn(p, k) {
				continue
			}
			race := first || slices.Contains(pkgs.needRace, p)
			jobs = append(jobs, vmJob{kernel: k, pkg: p, race: race, run: run(p)})
		}
		if first && *flagRace && *flagRaceRun != "" && *flagRun == "" {
			// Package integration stays a plain build for its
			// allocation tests; its RDMA, barrier and block server
			// tests run a second time under -race.
			jobs = append(jobs, vmJob{kernel: k, pkg: modulePath + "/integration", race: true, run: *flagRaceRun})
		}
	}
	// Longest first; among equals, the kernels' order.
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].expected() > jobs[j].expected() })
	return jobs, left
}

// runVMJobs runs the jobs, -p at a time across all kernels (so that no
// kernel waits for the last package of another), and adds each kernel's
// tally, per-package counts and boot times to the summary, in the
// kernels' order.
func runVMJobs(jobs []vmJob, kernels []string, fetched map[string]*kernel.Kernel) {
	stage(fmt.Sprintf("integration tests: %d package runs on %d kernels, %d at a time", len(jobs), len(kernels), *flagParallel))
	t0 := time.Now()
	var (
		mu      sync.Mutex
		tallies = map[string]*tally{}
		stopped bool // -short-circuit saw a failure
		// crashNotes name the runs repeated after a known kernel crash or
		// after rdsvm was killed while booting.
		crashNotes []string
	)
	for _, k := range kernels {
		tallies[k] = &tally{}
	}
	next := make(chan vmJob)
	var wg sync.WaitGroup
	for range max(*flagParallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				kk := fetched[j.kernel]
				args := []string{"test", "-tags", "integration", "-exec", rdsvmPath, "-count=1", "-json", "-v", "-timeout", "10m"}
				env := []string{"RDSVM_KERNEL=" + kk.Spec()}
				if j.race {
					args = append(args, "-race")
					env = append(env, "CGO_ENABLED=1")
				}
				if j.run != "" {
					args = append(args, "-run", j.run)
				}
				args = append(args, j.pkg)
				r, err := goTestRun(kk.Release, j.race, env, args...)
				if err != nil {
					fmt.Printf("rdstest: %v\n", err)
				}
				t := r.t
				why := ""
				if k, ok := knownCrashIn(r.crashes); ok && t.failed > 0 {
					why = fmt.Sprintf("the guest crashed on a known kernel bug (%s: %s)", k.signature, k.evidence)
				} else if len(r.silent) > 0 {
					why = "rdsvm ended without a word after it said it was booting the VM, before any test ran (killed from outside?)"
					for _, l := range hostKills() {
						fmt.Println("rdstest: host kernel: " + l)
					}
				}
				if why != "" {
					line := fmt.Sprintf("kernel %s: %s: %s; running the package once more", kk.Release, j.pkg, why)
					fmt.Println("rdstest: " + line)
					r, err = goTestRun(kk.Release, j.race, env, args...)
					if err != nil {
						fmt.Printf("rdstest: %v\n", err)
					}
					t = r.t
					mu.Lock()
					crashNotes = append(crashNotes, line+fmt.Sprintf("; the rerun: %s", t))
					mu.Unlock()
				}
				mu.Lock()
				tallies[j.kernel].add(t)
				if t.failed > 0 && *flagShort {
					stopped = true
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		mu.Lock()
		stop := stopped
		mu.Unlock()
		if stop {
			break
		}
		next <- j
	}
	close(next)
	wg.Wait()
	summary = append(summary, crashNotes...)
	var all tally
	for _, k := range kernels {
		kk := fetched[k]
		note("kernel %s: %s", kernelLabel(k, kk), *tallies[k])
		notePackages(kk.Release)
		for _, b := range bootLines[kk.Release] {
			summary = append(summary, "  "+b)
		}
		all.add(*tallies[k])
	}
	note("integration tests on %s: %s (%s)", strings.Join(kernels, ", "), all, time.Since(t0).Round(time.Second))
	total.add(all)
}

// killLine matches what the host kernel logs when it kills or faults a
// process.
var killLine = regexp.MustCompile(`(?i)out of memory|oom|killed process|segfault|general protection|rdsvm`)

// hostKills returns the last lines of the host kernel's log that say it
// killed or faulted a process, for a package run whose rdsvm died without
// a word; or one line saying why the log could not be read.
func hostKills() []string {
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		return []string{fmt.Sprintf("dmesg could not be read (%v)", err)}
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if killLine.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return []string{"no process killed or faulted in dmesg"}
	}
	return lines[max(len(lines)-20, 0):]
}
