package cref

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// UseOnceMode selects what useonce-c's trials write.
type UseOnceMode string

const (
	// UseOnceKey: writes into a use-once key, at once and a second after
	// its use; steps first, second, later.
	UseOnceKey UseOnceMode = "useonce"
	// UseOnceBogus: one write with a cookie never issued; step bogus.
	UseOnceBogus UseOnceMode = "bogus"
)

// Steps are the summary lines a mode prints.
func (m UseOnceMode) Steps() []string {
	if m == UseOnceBogus {
		return []string{"bogus"}
	}
	return []string{"first", "second", "later"}
}

// UseOnceArgs are useonce-c's arguments: trial k uses ports Port+2k
// (server) and Port+2k+1 (client) and TOS[k], moving on to the next
// attempt when a connection does not come up, so TOS should have a few
// more entries than Trials.
type UseOnceArgs struct {
	Server, Client netip.Addr
	Port           uint16
	TOS            []uint8
	Trials         int
	Live           int // registrations the client holds through a trial
	Mode           UseOnceMode
}

// StepCounts counts the statuses of one step's writes.
type StepCounts struct {
	Ops, Success, RemoteError, Canceled, Dropped, Other, Timeout int
}

// Add returns the sum of c and d.
func (c StepCounts) Add(d StepCounts) StepCounts {
	return StepCounts{c.Ops + d.Ops, c.Success + d.Success, c.RemoteError + d.RemoteError,
		c.Canceled + d.Canceled, c.Dropped + d.Dropped, c.Other + d.Other, c.Timeout + d.Timeout}
}

// UseOnceResult is what a run of useonce-c printed: its counts per step,
// its violations (a refused write that changed memory or delivered its
// payload, or a landed one that did not) and its whole output.
type UseOnceResult struct {
	Steps      map[string]StepCounts
	Violations int
	Output     string
}

// RunUseOnce runs bin (useonce-c, built from
// integration/internal/bench/cbaseline/useonce.c) with a. A failed run is
// an error, with the program's output.
func RunUseOnce(ctx context.Context, bin string, a UseOnceArgs) (UseOnceResult, error) {
	tos := make([]string, len(a.TOS))
	for i, v := range a.TOS {
		tos[i] = strconv.Itoa(int(v))
	}
	mode := a.Mode
	if mode == "" {
		mode = UseOnceKey
	}
	args := []string{a.Server.String(), a.Client.String(), strconv.Itoa(int(a.Port)), strings.Join(tos, ","),
		strconv.Itoa(a.Trials), strconv.Itoa(a.Live), string(mode)}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return UseOnceResult{Output: out.String()}, fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	r, err := ParseUseOnce(out.Bytes(), mode)
	r.Output = out.String()
	return r, err
}

// ParseUseOnce reads useonce-c's summary lines
// "useonce-c: STEP ops=N success=N ..." for the steps of mode and
// "useonce-c: violations=N ...".
func ParseUseOnce(out []byte, mode UseOnceMode) (UseOnceResult, error) {
	r := UseOnceResult{Steps: map[string]StepCounts{}, Violations: -1}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "useonce-c: "))
		if len(f) == 0 {
			continue
		}
		if v, ok := strings.CutPrefix(f[0], "violations="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("useonce-c line %q: %v", sc.Text(), err)
			}
			r.Violations = n
			continue
		}
		if len(f) != 8 || !slices.Contains(mode.Steps(), f[0]) {
			continue
		}
		var c StepCounts
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("useonce-c line %q: %v", sc.Text(), err)
			}
			switch k {
			case "ops":
				c.Ops = n
			case "success":
				c.Success = n
			case "remote_error":
				c.RemoteError = n
			case "canceled":
				c.Canceled = n
			case "dropped":
				c.Dropped = n
			case "other":
				c.Other = n
			case "timeout":
				c.Timeout = n
			default:
				return r, fmt.Errorf("useonce-c line %q: unknown field %s", sc.Text(), k)
			}
		}
		r.Steps[f[0]] = c
	}
	for _, s := range mode.Steps() {
		if _, ok := r.Steps[s]; !ok {
			return r, fmt.Errorf("useonce-c printed no %q summary", s)
		}
	}
	if r.Violations < 0 {
		return r, fmt.Errorf("useonce-c printed no violations line")
	}
	return r, nil
}

// PlausibleAsC reports whether goN of goOps outcomes is explained by a C
// reference that saw the outcome cN times in cOps trials in the same VM
// run: C must have seen it at all, and goN or more must keep a chance of
// at least 1% at the highest rate C's count allows (the one-sided 95%
// upper confidence bound), so that Go showing it clearly more often than
// C does is still an error. The string says why.
func PlausibleAsC(goN, goOps, cN, cOps int) (bool, string) {
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
