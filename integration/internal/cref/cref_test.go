package cref

import (
	"testing"
	"time"
)

func TestParseProbe(t *testing.T) {
	for _, tc := range []struct {
		out     string
		want    ProbeResult
		wantErr bool
	}{
		{"RDSFAULT-PROBE|result=congested\n", ProbeCongested, false},
		{"noise\nRDSFAULT-PROBE|result=sent\n", ProbeSent, false},
		{"RDSFAULT-PROBE|result=error|errno=22|error=Invalid argument\n", 0, true},
		{"", 0, true},
		{"RDSFAULT|accepted=1\n", 0, true},
	} {
		got, err := parseProbe(tc.out)
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("parseProbe(%q) = %v, %v; want %v, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseUseOnce(t *testing.T) {
	out := []byte(`useonce-c: trial 0: TOS 11: bogus remote_error after 3 ms
useonce-c: trial 1: TOS 12: bogus timeout after 10213 ms
useonce-c: bogus ops=2 success=0 remote_error=1 canceled=0 dropped=0 other=0 timeout=1
useonce-c: violations=0 (readable with nothing to read: 3)
`)
	r, err := ParseUseOnce(out, UseOnceBogus)
	if err != nil {
		t.Fatal(err)
	}
	if want := (StepCounts{Ops: 2, RemoteError: 1, Timeout: 1}); r.Steps["bogus"] != want || r.Violations != 0 {
		t.Errorf("bogus: %+v, violations %d; want %+v, 0", r.Steps["bogus"], r.Violations, want)
	}
	if _, err := ParseUseOnce(out, UseOnceKey); err == nil {
		t.Error("the use-once form parsed output without its steps")
	}
	key := []byte(`useonce-c: first ops=3 success=3 remote_error=0 canceled=0 dropped=0 other=0 timeout=0
useonce-c: second ops=3 success=2 remote_error=1 canceled=0 dropped=0 other=0 timeout=0
useonce-c: later ops=2 success=0 remote_error=1 canceled=0 dropped=1 other=0 timeout=0
useonce-c: violations=1 (readable with nothing to read: 0)
`)
	r, err = ParseUseOnce(key, UseOnceKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := (StepCounts{Ops: 2, RemoteError: 1, Dropped: 1}); r.Steps["later"] != want || r.Violations != 1 {
		t.Errorf("later: %+v, violations %d; want %+v, 1", r.Steps["later"], r.Violations, want)
	}
	if _, err := ParseUseOnce(key[:len(key)-45], UseOnceKey); err == nil {
		t.Error("output without its violations line parsed")
	}
	if _, err := ParseUseOnce([]byte("useonce-c: bogus ops=1 success=0 remote_error=1 canceled=0 dropped=0 other=0 stuck=0\nuseonce-c: violations=0\n"), UseOnceBogus); err == nil {
		t.Error("an unknown field parsed")
	}
}

func TestPlausibleAsC(t *testing.T) {
	for _, tc := range []struct {
		goN, goOps, cN, cOps int
		want                 bool
	}{
		{0, 1, 0, 40, true},    // nothing to explain
		{1, 1, 0, 40, false},   // C never showed it
		{1, 1, 2, 40, true},    // one Go write, C 2 in 40
		{1, 2, 1, 160, true},   // rare in C, rare in Go
		{10, 10, 1, 40, false}, // Go far above C's rate
		{3, 3, 40, 40, true},   // C always shows it
	} {
		if got, why := PlausibleAsC(tc.goN, tc.goOps, tc.cN, tc.cOps); got != tc.want {
			t.Errorf("PlausibleAsC(Go %d/%d, C %d/%d) = %v (%s), want %v", tc.goN, tc.goOps, tc.cN, tc.cOps, got, why, tc.want)
		}
	}
	// Clopper-Pearson: 0 in 40 allows up to about 7.2% (1-0.05^(1/40)).
	if u := upperRate(0, 40); u < 0.071 || u > 0.073 {
		t.Errorf("upperRate(0, 40) = %.4f, want 0.072", u)
	}
	if p := binomialTail(2, 1, 0.5); p < 0.7499 || p > 0.7501 {
		t.Errorf("binomialTail(2, 1, 0.5) = %v, want 0.75", p)
	}
}

func TestParsePing(t *testing.T) {
	for _, tc := range []struct {
		out     string
		want    PingResult
		wantErr bool
	}{
		{"RDSFAULT-PING|sockets=64|answered=57|slowest_ms=1200\n", PingResult{64, 57, 1200 * time.Millisecond}, false},
		{"noise\nRDSFAULT-PING|sockets=8|answered=8|slowest_ms=0\n", PingResult{8, 8, 0}, false},
		{"RDSFAULT-PING|sockets=8|answered=9|slowest_ms=3\n", PingResult{}, true},
		{"RDSFAULT-PING|sockets=0|answered=0|slowest_ms=3\n", PingResult{}, true},
		{"RDSFAULT-PING|sockets=8\n", PingResult{}, true},
		{"RDSFAULT-PROBE|result=sent\n", PingResult{}, true},
		{"", PingResult{}, true},
	} {
		got, err := parsePing(tc.out)
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("parsePing(%q) = %+v, %v; want %+v, error %v", tc.out, got, err, tc.want, tc.wantErr)
		}
	}
	if u := (PingResult{Sockets: 64, Answered: 57}).Unanswered(); u != 7 {
		t.Errorf("Unanswered = %d, want 7", u)
	}
}
