//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/integration/internal/cref"
	"github.com/go-rds/rds/integration/vmtest"
)

// cUseOnceBin is integration/internal/bench/cbaseline/useonce.c, built on
// the host into this package's testdata (rdstest does it before the
// integration stage).
const cUseOnceBin = "testdata/useonce-c"

// judgeBogusWrite judges a WRITE with a bogus cookie that the kernel
// reported dropped, or not at all by its deadline (st), instead of
// refusing it with a remote access error. Linux 7.2 sometimes does (the
// connection's shutdown stuck in rds_ib_conn_path_shutdown); it is
// accepted only as far as the plain C reference's bogus writes
// (useonce-c, MODE bogus) show the same outcome in this VM run, at a
// plausible rate (cref.PlausibleAsC): 40 trials on four RDS/IB
// connections (TOS values of their own), 40 more up to 160 while they do
// not account for it. It logs a DEVIATION line and fails unless C
// accounts for it or RDSTEST_RELIABILITY_STRICT=0.
func judgeBogusWrite(t *testing.T, st barrier.Status) {
	t.Helper()
	signature, count := "bogus-cookie-write-no-status", func(c cref.StepCounts) int { return c.Timeout }
	switch st {
	case barrier.Dropped:
		signature, count = "bogus-cookie-write-dropped", func(c cref.StepCounts) int { return c.Dropped }
	case barrier.TimedOut:
	default:
		t.Fatalf("judgeBogusWrite(%v): not a deviation the C reference can account for", st)
	}
	bin, err := filepath.Abs(cUseOnceBin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the C reference is missing (%v): rdstest builds it; by hand: gcc -O2 -static -o integration/%s integration/internal/bench/cbaseline/useonce.c", err, cUseOnceBin)
	}
	const trials, maxTrials = 40, 160
	var c cref.StepCounts
	ok, why := false, ""
	for c.Ops < maxTrials && !ok {
		tos := make([]uint8, trials+10)
		for i := range tos {
			tos[i] = uint8(40 + i%4)
		}
		base := port()
		for range 2*len(tos) - 1 {
			port()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		r, err := cref.RunUseOnce(ctx, bin, cref.UseOnceArgs{Server: vmtest.IBAddr1, Client: vmtest.IBAddr2, Port: base,
			TOS: tos, Trials: trials, Mode: cref.UseOnceBogus})
		cancel()
		for _, l := range strings.Split(strings.TrimSpace(r.Output), "\n") {
			if !strings.Contains(l, "remote_error after") {
				t.Log(l)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		c = c.Add(r.Steps["bogus"])
		ok, why = cref.PlausibleAsC(1, 1, count(c), c.Ops)
	}
	basis, strict := "none", os.Getenv("RDSTEST_RELIABILITY_STRICT") != "0"
	if ok {
		basis = "c"
	}
	st01 := 0
	if strict {
		st01 = 1
	}
	t.Logf("DEVIATION|%s|kernel=%s|test=%s|go=1|bound=-1|c=%d|basis=%s|strict=%d", signature, vmtest.KernelRelease(), t.Name(), count(c), basis, st01)
	t.Logf("kernel: a write with a bogus cookie %v: C's bogus writes in this VM: %+v (%s)", st, c, why)
	if !ok && strict {
		t.Fatalf("write with a bogus cookie: %v, want remote error: the C reference does not account for it (%s)", st, why)
	}
}
