package netlinkcfg

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNetemValidate(t *testing.T) {
	for _, n := range []Netem{
		{},
		{Loss: 100},
		{Loss: 0.5, Duplicate: 1, Corrupt: 2},
		{Delay: 10 * time.Millisecond, Jitter: time.Millisecond, Reorder: 25},
		{Delay: maxNetemDuration},
		{Limit: 10000},
	} {
		if err := n.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", n, err)
		}
	}
	for _, tc := range []struct {
		n    Netem
		want string
	}{
		{Netem{Loss: -1}, "loss must be a percentage in [0, 100], got -1"},
		{Netem{Loss: 100.5}, "loss must be a percentage in [0, 100], got 100.5"},
		{Netem{Duplicate: math.NaN()}, "duplicate must be a percentage in [0, 100], got NaN"},
		{Netem{Corrupt: math.Inf(1)}, "corrupt must be a percentage in [0, 100], got +Inf"},
		{Netem{Reorder: 101, Delay: time.Millisecond}, "reorder must be a percentage in [0, 100], got 101"},
		{Netem{Delay: -time.Millisecond}, "delay must not be negative"},
		{Netem{Delay: 1500 * time.Nanosecond}, "delay must be a whole number of microseconds, got 1.5µs"},
		{Netem{Delay: maxNetemDuration + time.Microsecond}, "delay must be at most"},
		{Netem{Jitter: time.Millisecond}, "jitter needs a delay > 0"},
		{Netem{Reorder: 25}, "reorder needs a delay > 0"},
	} {
		err := tc.n.Validate()
		if err == nil {
			t.Errorf("%+v.Validate() = nil, want %q", tc.n, tc.want)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "netem: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Validate() = %q, want ErrInvalid containing %q", tc.n, err, tc.want)
		}
	}
	// Several problems are reported together.
	err := Netem{Loss: -1, Jitter: time.Millisecond}.Validate()
	if err == nil || !strings.Contains(err.Error(), "loss") || !strings.Contains(err.Error(), "jitter") {
		t.Errorf("two problems: %v, want both named", err)
	}
}

func TestPschedTickPerUsec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		// Linux since 2.6.x with high-resolution timers: 1 µs = 15.625 ticks.
		{"000003e8 00000040 000f4240 3b9aca00\n", 15.625},
		// A nanosecond clock: 1 µs = 1000 ticks.
		{"000003e8 00000040 3b9aca00 3b9aca00\n", 1000},
		{"00000001 00000001 000f4240 00000064\n", 1},
	} {
		got, err := pschedTickPerUsec(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("pschedTickPerUsec(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "1 2", "zz 40 f4240", "0 40 f4240"} {
		if _, err := pschedTickPerUsec(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("pschedTickPerUsec(%q) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestPercentFromU32(t *testing.T) {
	for _, tc := range []struct {
		v    uint32
		want float64
	}{{0, 0}, {math.MaxUint32, 100}, {math.MaxUint32 / 4, 25}} {
		if got := percentFromU32(tc.v); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("percentFromU32(%d) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
