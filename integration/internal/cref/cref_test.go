package cref

import "testing"

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
