//go:build integration

package rdmafaults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/internal/cref"
	"github.com/go-rds/rds/integration/vmtest"
)

// useOnceC is the plain C reference of TestUseOnceKey,
// integration/internal/bench/cbaseline/useonce.c, which rdstest compiles into
// testdata/ (see TESTING.md, "C reference programs").
const useOnceC = "useonce-c"

// cSteps holds the C program's per-step status counts (first, second,
// later; or bogus), as tallies.
type cSteps map[string]tally

// cForm is a form of the C reference: its client holds live more
// registrations through each trial, and its mode (see useonce.c).
type cForm struct {
	live int
	mode cref.UseOnceMode
}

// deadKeyForm is the form whose later writes go into a dead key.
func deadKeyForm(live int) cForm { return cForm{live: live, mode: cref.UseOnceKey} }

// bogusForm is the form whose writes carry a cookie never issued.
var bogusForm = cForm{mode: cref.UseOnceBogus}

// judged is the step whose outcomes Go writes of this form are judged
// against: the writes a second after the key died, or the bogus ones.
func (f cForm) judged() string {
	if f.mode == cref.UseOnceBogus {
		return "bogus"
	}
	return "later"
}

// runUseOnceC runs the C reference of form f in this VM (same kernel
// boot) for trials trials, on ports of its own and on deadKeyConns, the
// connections the Go tests' dead-key writes use too, and returns its
// counts. A missing binary or a failed run fails the test: the kernel
// deviation the Go test may accept is only what C shows.
func runUseOnceC(t *testing.T, trials int, f cForm) cSteps {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("testdata", useOnceC))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the C reference is missing (%v): rdstest builds it; by hand: go generate ./integration/rdmafaults", err)
	}
	// Trials take turns on the four connections; an attempt whose
	// connection does not come up moves on to the next, up to ten times
	// in all.
	own := deadKeyTOS(t)
	tos := make([]uint8, trials+10)
	for i := range tos {
		tos[i] = own[i%len(own)]
	}
	base := port()
	for range 2*len(tos) - 1 {
		port()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := cref.RunUseOnce(ctx, bin, cref.UseOnceArgs{Server: vmtest.IBAddr1, Client: vmtest.IBAddr2, Port: base,
		TOS: tos, Trials: trials, Live: f.live, Mode: f.mode})
	for _, l := range strings.Split(strings.TrimSpace(r.Output), "\n") {
		t.Log(l)
	}
	if err != nil {
		t.Fatalf("%s: %v", useOnceC, err)
	}
	if r.Violations != 0 {
		// What the plain C program sees is the kernel's behaviour, not
		// this library's: report it. The Go side is judged on its own
		// trials (a late success there still fails the test).
		t.Logf("kernel: the C reference saw the kernel deviate from the use-once rule: violations=%d (see its log above)", r.Violations)
	}
	steps := cSteps{}
	for k, c := range r.Steps {
		steps[k] = tally{ops: c.Ops, success: c.Success, remote: c.RemoteError, dropped: c.Dropped,
			canceled: c.Canceled, other: c.Other, timeout: c.Timeout}
	}
	return steps
}

// useOnceTrials is how many trials the shared run of the C reference has
// at first; useOnceMaxTrials is how many it may grow to (see
// judgeDeadKeyWrites).
const useOnceTrials, useOnceMaxTrials = 40, 160

var useOnceRef struct {
	sync.Mutex
	steps map[cForm]cSteps
}

// useOnceReference runs the C reference of form f once per test binary
// (the first test whose Go writes deviate pays: without a deviation there
// is nothing to judge, and the reference costs 15-75 s per kernel) and
// returns its counts to every test that judges a write against it.
func useOnceReference(t *testing.T, f cForm) cSteps {
	t.Helper()
	useOnceRef.Lock()
	defer useOnceRef.Unlock()
	if useOnceRef.steps == nil {
		useOnceRef.steps = map[cForm]cSteps{}
	}
	if useOnceRef.steps[f] == nil {
		useOnceRef.steps[f] = runUseOnceC(t, useOnceTrials, f)
	}
	return useOnceRef.steps[f]
}

// moreUseOnceReference runs form f of the C reference for another trials
// trials in this VM, on the same connections, adds them to its counts and
// returns those.
func moreUseOnceReference(t *testing.T, trials int, f cForm) cSteps {
	t.Helper()
	useOnceReference(t, f)
	more := runUseOnceC(t, trials, f)
	useOnceRef.Lock()
	defer useOnceRef.Unlock()
	sum := cSteps{}
	for k, v := range useOnceRef.steps[f] {
		m := more[k]
		sum[k] = tally{ops: v.ops + m.ops, success: v.success + m.success, remote: v.remote + m.remote,
			dropped: v.dropped + m.dropped, canceled: v.canceled + m.canceled, other: v.other + m.other, timeout: v.timeout + m.timeout}
	}
	useOnceRef.steps[f] = sum
	return sum
}

// judgeDeadKeyWrites judges the statuses of RDMA WRITEs into keys the
// peer had already given up (a use-once key after its use, a key freed
// after the pool's confirmation), issued a second or more after the key
// died, on deadKeyConns (newDeadKeyPair), while the registering socket
// held live other registrations. The kernel must refuse them with a
// remote access error. Linux 7.2 sometimes reports dropped instead, or
// nothing within the 10 s deadline (see TestUseOnceKey for the
// mechanism; with live registrations the drop's status waits until the
// registering socket closes); each is accepted only as far as the C
// reference's writes a second after the key died ("later"), with as many
// live registrations, on the same connections in the same VM run, show
// it, at a plausible rate (cref.PlausibleAsC), and is logged as a DEVIATION
// line for rdstest's summary. The outcome is rare (C: 0 to 5 of 40 per
// run on 7.2), so while C's trials so far do not account for Go's count,
// C runs 40 more, up to useOnceMaxTrials, before the verdict: a Go rate
// clearly above C's still fails. Without that basis the deviation fails
// unless RDSTEST_RELIABILITY_STRICT=0, which reports it as accepted
// without a basis. Success, cancellation or another status always fails.
// It returns the C counts it judged against.
func judgeDeadKeyWrites(t *testing.T, what string, got tally, live int) cSteps {
	t.Helper()
	var c cSteps // the C reference runs only for a deviation to judge
	if bad := got.success + got.canceled + got.other; bad > 0 {
		t.Errorf("%s: %d of %d writes into a dead key were not refused (success %d, canceled %d, other %d)", what, bad, got.ops, got.success, got.canceled, got.other)
	}
	type deviation struct {
		name, signature string
		goN             int
		cN              func(tally) int
	}
	devs := []deviation{
		{"dropped", "dead-key-write-dropped", got.dropped, func(c tally) int { return c.dropped }},
		{"timed out", "dead-key-write-no-status", got.timeout, func(c tally) int { return c.timeout }},
	}
	for _, dev := range devs {
		if dev.goN == 0 {
			continue
		}
		c = judgeAgainstC(t, what, dev.signature, dev.name, dev.goN, got.ops, deadKeyForm(live), dev.cN)
	}
	return c
}

// judgeBogusWrites judges the statuses of RDMA WRITEs with a cookie the
// peer never issued (TestBogusAndStaleCookies). The kernel must refuse
// them with a remote access error. Linux 7.2 sometimes reports nothing
// within the deadline, the connection's shutdown stuck
// (rds_ib_conn_path_shutdown waits for the flush of the refused WRITE);
// C's bogus writes showed it 2 and 3 times in 40 in two VM runs
// (2026-11-26). Dropped and no status are each accepted only as far as
// the C reference's bogus writes (useonce.c, MODE bogus, on deadKeyConns)
// show them in the same VM run, judged as in judgeDeadKeyWrites, and
// logged as bogus-cookie-write-dropped and bogus-cookie-write-no-status.
// Success, cancellation or another status always fails.
func judgeBogusWrites(t *testing.T, what string, got tally) {
	t.Helper()
	if bad := got.success + got.canceled + got.other; bad > 0 {
		t.Errorf("%s: %d of %d writes with a bogus cookie were not refused (success %d, canceled %d, other %d)", what, bad, got.ops, got.success, got.canceled, got.other)
	}
	if got.dropped > 0 {
		judgeAgainstC(t, what, "bogus-cookie-write-dropped", "dropped", got.dropped, got.ops, bogusForm, func(c tally) int { return c.dropped })
	}
	if got.timeout > 0 {
		judgeAgainstC(t, what, "bogus-cookie-write-no-status", "timed out", got.timeout, got.ops, bogusForm, func(c tally) int { return c.timeout })
	}
}

// judgeDeadKeyLanded judges WRITEs into a freed key that landed although
// the owner's peer had acknowledged the registration a second before
// (TestBogusAndStaleCookies): the kernel kills such a key only once its
// deferred flush ran, and the C reference's writes a second after a key
// died ("later") sometimes succeed too (6.1, 7.2: 1 of 40 in some runs).
// The library's answer is the quarantine, never reusing memory before the
// peer confirms; this judges only the kernel's timing, against C's late
// successes in the same VM run (grown as in judgeDeadKeyWrites), logged as
// dead-key-write-landed. Without C's basis it fails in strict mode.
func judgeDeadKeyLanded(t *testing.T, what string, landed, ops int) {
	t.Helper()
	if landed > 0 {
		judgeAgainstC(t, what, "dead-key-write-landed", "landed", landed, ops, deadKeyForm(0), func(c tally) int { return c.success })
	}
}

// judgeAgainstC judges goN of goOps writes that ended as name (cN counts
// the same outcome in C's tallies) against form f of the C reference, its
// judged step, growing C's trials up to useOnceMaxTrials while they do not
// account for Go's count. It logs the DEVIATION line under signature,
// fails in strict mode without C's basis, and returns the C counts it
// judged against.
func judgeAgainstC(t *testing.T, what, signature, name string, goN, goOps int, f cForm, cN func(tally) int) cSteps {
	t.Helper()
	step := f.judged()
	c := useOnceReference(t, f)
	ok, why := cref.PlausibleAsC(goN, goOps, cN(c[step]), c[step].ops)
	for !ok && c[step].ops < useOnceMaxTrials {
		t.Logf("%s: Go %d/%d %s, C %d/%d: %s; C runs %d more trials on the same connections", what, goN, goOps, name, cN(c[step]), c[step].ops, why, useOnceTrials)
		c = moreUseOnceReference(t, useOnceTrials, f)
		ok, why = cref.PlausibleAsC(goN, goOps, cN(c[step]), c[step].ops)
	}
	ref := c[step]
	basis, st := "none", 0
	if ok {
		basis = "c"
	}
	if strict() {
		st = 1
	}
	t.Logf("DEVIATION|%s|kernel=%s|test=%s|go=%d|bound=-1|c=%d|basis=%s|strict=%d", signature, vmtest.KernelRelease(), t.Name(), goN, cN(ref), basis, st)
	t.Logf("kernel: %s: a write %s: Go %d/%d, C %d/%d (%s writes, %d live registrations; %s)", what, name, goN, goOps, cN(ref), ref.ops, step, f.live, why)
	if !ok && strict() {
		t.Errorf("%s: %d of %d writes %s, want a remote access error: the C reference does not account for it (%s)", what, goN, goOps, name, why)
	}
	return c
}

// strict reports whether every kernel deviation must be reproduced by the
// C reference in the same run: the default, as in the delivery suites;
// RDSTEST_RELIABILITY_STRICT=0 only reports those that are not.
func strict() bool { return os.Getenv("RDSTEST_RELIABILITY_STRICT") != "0" }
