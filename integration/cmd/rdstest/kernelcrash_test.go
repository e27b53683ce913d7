package main

import "testing"

func TestKnownCrashIn(t *testing.T) {
	known := "Kernel panic - not syncing: Fatal exception (Oops: divide error in rds_queue_reconnect)"
	other := "Kernel panic - not syncing: Fatal exception (Oops: general protection fault in rds_send_xmit)"
	for _, tc := range []struct {
		crashes []string
		want    bool
	}{
		{nil, false},
		{[]string{known}, true},
		{[]string{known, known}, true},
		{[]string{other}, false},
		{[]string{known, other}, false}, // one VM crashed otherwise
		{[]string{"Kernel panic - not syncing: Fatal exception"}, false},
	} {
		if _, got := knownCrashIn(tc.crashes); got != tc.want {
			t.Errorf("knownCrashIn(%q) = %v, want %v", tc.crashes, got, tc.want)
		}
	}
}
