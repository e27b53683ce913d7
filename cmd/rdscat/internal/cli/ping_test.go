//go:build linux

package cli

import (
	"testing"
	"time"
)

func TestPingSummaryRTTs(t *testing.T) {
	sum := pingSummary{Sent: 4}
	sum.addRTTs([]time.Duration{time.Millisecond, 3 * time.Millisecond})
	want := pingSummary{Sent: 4, Received: 2, LossPercent: 50, MinMS: 1, AvgMS: 2, MaxMS: 3, StddevMS: 1}
	if sum.Received != want.Received || sum.LossPercent != want.LossPercent || sum.MinMS != want.MinMS ||
		sum.AvgMS != want.AvgMS || sum.MaxMS != want.MaxMS || sum.StddevMS != want.StddevMS {
		t.Errorf("got %+v, want %+v", sum, want)
	}
	none := pingSummary{Sent: 3}
	none.addRTTs(nil)
	if none.Received != 0 || none.LossPercent != 100 || none.MinMS != 0 || none.StddevMS != 0 {
		t.Errorf("no replies: got %+v", none)
	}
}
