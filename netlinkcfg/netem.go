package netlinkcfg

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Netem describes a tc netem root qdisc that degrades a link's egress
// traffic. Percentages are in [0, 100]; a zero field disables that
// impairment. Durations have microsecond resolution.
type Netem struct {
	Loss      float64       // percent of packets dropped
	Delay     time.Duration // added latency
	Jitter    time.Duration // random variation of Delay; needs Delay > 0
	Duplicate float64       // percent of packets sent twice
	Corrupt   float64       // percent of packets with a flipped bit
	Reorder   float64       // percent of packets sent at once (ahead of delayed ones); needs Delay > 0
	Limit     uint32        // queue limit in packets; 0 means netem's default of 1000
}

// maxNetemDuration is the largest delay or jitter netlink can carry
// (microseconds in a uint32).
const maxNetemDuration = time.Duration(math.MaxUint32) * time.Microsecond

// Validate checks the parameters the way the kernel and tc(8) would,
// before anything is sent, and explains what is wrong.
func (n Netem) Validate() error {
	var bad []string
	pct := func(name string, v float64) {
		if math.IsNaN(v) || v < 0 || v > 100 {
			bad = append(bad, name+" must be a percentage in [0, 100], got "+formatFloat(v))
		}
	}
	pct("loss", n.Loss)
	pct("duplicate", n.Duplicate)
	pct("corrupt", n.Corrupt)
	pct("reorder", n.Reorder)
	dur := func(name string, d time.Duration) {
		switch {
		case d < 0:
			bad = append(bad, name+" must not be negative, got "+d.String())
		case d > maxNetemDuration:
			bad = append(bad, name+" must be at most "+maxNetemDuration.String()+", got "+d.String())
		case d%time.Microsecond != 0:
			bad = append(bad, name+" must be a whole number of microseconds, got "+d.String())
		}
	}
	dur("delay", n.Delay)
	dur("jitter", n.Jitter)
	if n.Jitter > 0 && n.Delay == 0 {
		bad = append(bad, "jitter needs a delay > 0")
	}
	if n.Reorder > 0 && n.Delay == 0 {
		bad = append(bad, "reorder needs a delay > 0 (netem reorders by sending some packets without the delay)")
	}
	if len(bad) > 0 {
		return invalidf("netem: %s", strings.Join(bad, "; "))
	}
	return nil
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// pschedTickPerUsec parses /proc/net/psched ("t2us us2t clock_res hz", in
// hex) and returns how many packet-scheduler ticks make a microsecond, the
// unit netem's latency and jitter travel in.
func pschedTickPerUsec(contents string) (float64, error) {
	f := strings.Fields(contents)
	if len(f) < 3 {
		return 0, invalidf("parse /proc/net/psched %q: want at least 3 hex fields", contents)
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 16, 32)
		if err != nil || n == 0 {
			return 0, invalidf("parse /proc/net/psched %q: field %d is not a non-zero hex number", contents, i+1)
		}
		v[i] = n
	}
	t2us, us2t, clockRes := float64(v[0]), float64(v[1]), float64(v[2])
	if v[2] == 1e9 {
		// A nanosecond clock: ticks are the clock's own units, and the
		// t2us/us2t ratio does not apply (tc(8) treats it the same way).
		t2us = us2t
	}
	return t2us / us2t * (clockRes / 1e6), nil
}

// percentFromU32 converts netem's fixed-point probability (MaxUint32 is
// 100 %) to a percentage.
func percentFromU32(v uint32) float64 {
	return float64(v) * 100 / math.MaxUint32
}
