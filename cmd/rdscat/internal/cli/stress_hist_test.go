//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestPrintLatencyHistogram(t *testing.T) {
	var b bytes.Buffer
	printLatencyHistogram(&b, []latencyBucket{
		{Low: 16.384, High: 32.767, Count: 3},
		{Low: 32.768, High: 65.535, Count: 120},
		{Low: 65.536, High: 131.071, Count: 0},
		{Low: 1048.576, High: 2097.151, Count: 1},
	})
	want := "" +
		"     16.4 µs .. 32.8 µs             3 |#\n" +
		"     32.8 µs .. 65.5 µs           120 |########################################\n" +
		"     65.5 µs .. 131.1 µs            0 |\n" +
		"     1.05 ms .. 2.10 ms             1 |#\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	printLatencyHistogram(&b, nil)
	if b.Len() != 0 {
		t.Errorf("empty histogram printed %q", b.String())
	}
}

func TestStressReportHistogram(t *testing.T) {
	rep := &stressReport{Sender: &senderReport{Mode: "rr", Sent: 4, Acked: 4, Latency: &latencyReport{
		Count: 4, Min: 20, Max: 40,
		Histogram: []latencyBucket{{Low: 16.384, High: 32.767, Count: 3}, {Low: 32.768, High: 65.535, Count: 1}},
	}}}
	var b bytes.Buffer
	printStress(&b, rep)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if n := len(lines); n < 3 || !strings.HasSuffix(lines[n-2], "3 |########################################") || !strings.HasSuffix(lines[n-1], "1 |##############") {
		t.Errorf("text report does not end with the histogram:\n%s", b.String())
	}
	j, err := json.Marshal(rep.Sender.Latency)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"histogram":[{"low":16.384,"high":32.767,"count":3},{"low":32.768,"high":65.535,"count":1}]`; !strings.Contains(string(j), want) {
		t.Errorf("JSON %s lacks %s", j, want)
	}
}
