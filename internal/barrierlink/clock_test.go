package barrierlink

import (
	"strings"
	"testing"
	"time"
)

func TestClockRoundTrip(t *testing.T) {
	now := Clock()
	if now <= 0 {
		t.Fatalf("Clock() = %d, want > 0 once the package is initialized", now)
	}
	d := time.Now().Add(3 * time.Second)
	ns := ClockOf(d)
	if got := ClockTime(ns); !got.Equal(d) {
		t.Errorf("ClockTime(ClockOf(%v)) = %v", d, got)
	}
	if ns < now+int64(3*time.Second)-int64(time.Second) || ns > Clock()+int64(3*time.Second) {
		t.Errorf("ClockOf(now+3s) = %d, Clock() was %d", ns, now)
	}
	// A time from the clock carries the monotonic reading (String shows
	// it as "m="), so time.Until reads one clock, not two.
	if s := ClockTime(ns).String(); !strings.Contains(s, "m=+") {
		t.Errorf("ClockTime(%d) = %s, without a monotonic reading", ns, s)
	}
	// A wall-clock time (no monotonic reading) converts by the wall clock.
	w := time.Unix(0, d.UnixNano())
	if diff := ClockOf(w) - ns; diff < -int64(time.Millisecond) || diff > int64(time.Millisecond) {
		t.Errorf("ClockOf of the same instant without a monotonic reading is %v off", time.Duration(diff))
	}
}
