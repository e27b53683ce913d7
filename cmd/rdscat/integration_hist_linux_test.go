//go:build integration

package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// histLineRE matches one histogram row of the human stress report.
var histLineRE = regexp.MustCompile(`^\s+\S+ [µm]s \.\. \S+ [µm]s\s+(\d+) \|#*$`)

// samplesRE finds the sample count on the latency line.
var samplesRE = regexp.MustCompile(`^  latency .*, (\d+) samples\)$`)

// TestIntegrationRdscatStressHistogram runs rdscat stress in request-reply
// mode and checks that both report forms show the latency histogram and that
// its counts add up to the measured messages.
func TestIntegrationRdscatStressHistogram(t *testing.T) {
	requireVM(t)
	addr := "127.0.0.1:4870"
	out, err := rdscatCmd(t, "stress", "-listen", addr, "-to", addr, "-duration", "2s").Output()
	if err != nil {
		t.Fatalf("stress: %v\n%s", err, out)
	}
	var samples, sum, rows int
	for _, l := range strings.Split(string(out), "\n") {
		if m := samplesRE.FindStringSubmatch(l); m != nil {
			samples, _ = strconv.Atoi(m[1])
		} else if m := histLineRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += n
			rows++
		}
	}
	if samples == 0 || rows == 0 || sum != samples {
		t.Fatalf("text report: %d samples, %d histogram rows summing to %d:\n%s", samples, rows, sum, out)
	}
	t.Logf("text: %d samples in %d rows\n%s", samples, rows, out)

	addr = "127.0.0.1:4871"
	out, err = rdscatCmd(t, "stress", "-listen", addr, "-to", addr, "-duration", "2s", "-json").Output()
	if err != nil {
		t.Fatalf("stress -json: %v\n%s", err, out)
	}
	v := decodeStress(t, "stress -json", out)
	if v.Sender == nil || v.Sender.Latency == nil {
		t.Fatalf("no sender latency in %s", out)
	}
	l := v.Sender.Latency
	var jsum uint64
	for i, b := range l.Histogram {
		if b.Low > b.High || (i > 0 && b.Low <= l.Histogram[i-1].High) {
			t.Errorf("bucket %d [%v, %v] out of order in %+v", i, b.Low, b.High, l.Histogram)
		}
		jsum += b.Count
	}
	if len(l.Histogram) == 0 || jsum != l.Count || l.Count != v.Sender.Acked {
		t.Fatalf("JSON: %d buckets summing to %d; latency count %d, acked %d, sent %d", len(l.Histogram), jsum, l.Count, v.Sender.Acked, v.Sender.Sent)
	}
	t.Logf("JSON: %d buckets, %d samples, acked %d, sent %d", len(l.Histogram), l.Count, v.Sender.Acked, v.Sender.Sent)
}
