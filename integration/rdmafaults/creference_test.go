//go:build integration

package rdmafaults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
)

// useOnceC is the plain C reference of TestUseOnceKey,
// integration/internal/bench/cbaseline/useonce.c, which rdstest compiles into
// testdata/ (see TESTING.md, "C reference programs").
const useOnceC = "useonce-c"

// cSteps holds the C program's per-step status counts (first, second,
// later), as tallies.
type cSteps map[string]tally

// runUseOnceC runs the C reference in this VM (same kernel boot) for
// trials trials, its client holding live more registrations through each
// (see useonce.c), on ports of its own and on deadKeyConns, the
// connections the Go tests' dead-key writes use too, and returns its
// counts. A missing
// binary or a failed run fails the test: the kernel deviation the Go test
// may accept is only what C shows.
func runUseOnceC(t *testing.T, trials, live int) cSteps {
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
	ntos := trials + 10
	tos := make([]string, ntos)
	for i := range tos {
		tos[i] = strconv.Itoa(int(own[i%len(own)]))
	}
	base := port()
	for range 2*ntos - 1 {
		port()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, vmtest.IBAddr1.String(), vmtest.IBAddr2.String(), strconv.Itoa(int(base)), strings.Join(tos, ","), strconv.Itoa(trials), strconv.Itoa(live))
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		t.Log(l)
	}
	if err != nil {
		t.Fatalf("%s: %v", useOnceC, err)
	}
	return parseUseOnceC(t, out.Bytes())
}

// parseUseOnceC reads the summary lines
// "useonce-c: STEP ops=N success=N ..." and "useonce-c: violations=N".
func parseUseOnceC(t *testing.T, out []byte) cSteps {
	t.Helper()
	steps := cSteps{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(sc.Text(), "useonce-c: "))
		if len(f) > 0 && strings.HasPrefix(f[0], "violations=") {
			// What the plain C program sees is the kernel's behaviour, not
			// this library's: report it. The Go side is judged on its own
			// trials (a late success there still fails the test).
			if f[0] != "violations=0" {
				t.Logf("kernel: the C reference saw the kernel deviate from the use-once rule: %s (see its log above)", f[0])
			}
			continue
		}
		if len(f) != 8 || (f[0] != "first" && f[0] != "second" && f[0] != "later") {
			continue
		}
		var c tally
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("C reference line %q: %v", sc.Text(), err)
			}
			switch k {
			case "ops":
				c.ops = n
			case "success":
				c.success = n
			case "remote_error":
				c.remote = n
			case "canceled":
				c.canceled = n
			case "dropped":
				c.dropped = n
			case "other":
				c.other = n
			case "timeout":
				c.timeout = n
			default:
				t.Fatalf("C reference line %q: unknown field %s", sc.Text(), k)
			}
		}
		steps[f[0]] = c
	}
	for _, s := range []string{"first", "second", "later"} {
		if _, ok := steps[s]; !ok {
			t.Fatalf("the C reference printed no %q summary", s)
		}
	}
	return steps
}

// binomialTail is P(X >= k) for X ~ Binomial(n, p).
func binomialTail(n, k int, p float64) float64 {
	if k <= 0 || p >= 1 {
		return 1
	}
	sum := 0.0
	for i := k; i <= n; i++ {
		lc, _ := math.Lgamma(float64(n + 1))
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lc - a - b + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

// upperRate is the one-sided 95% upper confidence bound (Clopper-Pearson)
// of a rate seen k times in n trials: the largest p at which k or fewer
// in n still has a 5% chance.
func upperRate(k, n int) float64 {
	if k >= n {
		return 1
	}
	lo, hi := float64(k)/float64(n), 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if 1-binomialTail(n, k+1, mid) > 0.05 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// plausibleAsC reports whether goN of goOps outcomes is explained by the
// C reference, which saw the outcome cN times in cOps trials in the same
// VM: C must have seen it at all, and goN or more must keep a chance of
// at least 1% at the highest rate C's count allows (upperRate), so that
// Go showing it clearly more often than C does is still an error.
func plausibleAsC(goN, goOps, cN, cOps int) (bool, string) {
	if goN == 0 {
		return true, ""
	}
	if cN == 0 || cOps == 0 {
		return false, fmt.Sprintf("C never showed it (%d/%d)", cN, cOps)
	}
	p := upperRate(cN, cOps)
	tail := binomialTail(goOps, goN, p)
	return tail >= 0.01, fmt.Sprintf("P(>= %d/%d) = %.3f at %.3f, the 95%% upper bound of C's rate", goN, goOps, tail, p)
}

// useOnceTrials is how many trials the shared run of the C reference has
// at first; useOnceMaxTrials is how many it may grow to (see
// judgeDeadKeyWrites).
const useOnceTrials, useOnceMaxTrials = 40, 160

var useOnceRef struct {
	sync.Mutex
	steps map[int]cSteps // by live registrations
}

// useOnceReference runs the C reference with live registrations once per
// test binary (the first test whose Go writes deviate pays: without a
// deviation there is nothing to judge, and the reference costs 15-75 s per
// kernel) and returns its counts to every test that judges a write into a
// dead key against it.
func useOnceReference(t *testing.T, live int) cSteps {
	t.Helper()
	useOnceRef.Lock()
	defer useOnceRef.Unlock()
	if useOnceRef.steps == nil {
		useOnceRef.steps = map[int]cSteps{}
	}
	if useOnceRef.steps[live] == nil {
		useOnceRef.steps[live] = runUseOnceC(t, useOnceTrials, live)
	}
	return useOnceRef.steps[live]
}

// moreUseOnceReference runs that form of the C reference for another
// trials trials in this VM, on the same connections, adds them to its
// counts and returns those.
func moreUseOnceReference(t *testing.T, trials, live int) cSteps {
	t.Helper()
	useOnceReference(t, live)
	more := runUseOnceC(t, trials, live)
	useOnceRef.Lock()
	defer useOnceRef.Unlock()
	sum := cSteps{}
	for k, v := range useOnceRef.steps[live] {
		m := more[k]
		sum[k] = tally{ops: v.ops + m.ops, success: v.success + m.success, remote: v.remote + m.remote,
			dropped: v.dropped + m.dropped, canceled: v.canceled + m.canceled, other: v.other + m.other, timeout: v.timeout + m.timeout}
	}
	useOnceRef.steps[live] = sum
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
// it, at a plausible rate (plausibleAsC), and is logged as a DEVIATION
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
		c = judgeAgainstC(t, what, dev.signature, dev.name, dev.goN, got.ops, live, dev.cN)
	}
	return c
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
		judgeAgainstC(t, what, "dead-key-write-landed", "landed", landed, ops, 0, func(c tally) int { return c.success })
	}
}

// judgeAgainstC judges goN of goOps writes into a dead key that ended as
// name (cN counts the same outcome in C's tallies) against the C
// reference with live registrations, its "later" writes, growing C's
// trials up to useOnceMaxTrials while they do not account for Go's count.
// It logs the DEVIATION line under signature, fails in strict mode without
// C's basis, and returns the C counts it judged against.
func judgeAgainstC(t *testing.T, what, signature, name string, goN, goOps, live int, cN func(tally) int) cSteps {
	t.Helper()
	c := useOnceReference(t, live)
	ok, why := plausibleAsC(goN, goOps, cN(c["later"]), c["later"].ops)
	for !ok && c["later"].ops < useOnceMaxTrials {
		t.Logf("%s: Go %d/%d %s, C %d/%d: %s; C runs %d more trials on the same connections", what, goN, goOps, name, cN(c["later"]), c["later"].ops, why, useOnceTrials)
		c = moreUseOnceReference(t, useOnceTrials, live)
		ok, why = plausibleAsC(goN, goOps, cN(c["later"]), c["later"].ops)
	}
	ref := c["later"]
	basis, st := "none", 0
	if ok {
		basis = "c"
	}
	if strict() {
		st = 1
	}
	t.Logf("DEVIATION|%s|kernel=%s|test=%s|go=%d|bound=-1|c=%d|basis=%s|strict=%d", signature, vmtest.KernelRelease(), t.Name(), goN, cN(ref), basis, st)
	t.Logf("kernel: %s: a write into a dead key %s: Go %d/%d, C %d/%d with %d live registrations (%s)", what, name, goN, goOps, cN(ref), ref.ops, live, why)
	if !ok && strict() {
		t.Errorf("%s: %d of %d writes into a dead key %s, want a remote access error: the C reference does not account for it (%s)", what, goN, goOps, name, why)
	}
	return c
}

// strict reports whether every kernel deviation must be reproduced by the
// C reference in the same run: the default, as in the delivery suites;
// RDSTEST_RELIABILITY_STRICT=0 only reports those that are not.
func strict() bool { return os.Getenv("RDSTEST_RELIABILITY_STRICT") != "0" }
