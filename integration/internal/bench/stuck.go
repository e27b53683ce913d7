package bench

import (
	"fmt"
	"strings"

	"github.com/go-rds/rds/rdssock"
)

// describeQueued formats the messages of ms with a local or remote port in
// [lo, hi]: their count and, for the first few, the ports and sequence
// numbers.
func describeQueued(ms []rdssock.QueuedMessage, lo, hi uint16) string {
	const shown = 4
	in := func(p uint16) bool { return p >= lo && p <= hi }
	var n int
	var first []string
	for _, m := range ms {
		if !in(m.Local.Port()) && !in(m.Remote.Port()) {
			continue
		}
		n++
		if len(first) < shown {
			first = append(first, fmt.Sprintf("%v->%v seq %d", m.Local, m.Remote, m.Seq))
		}
	}
	if n == 0 {
		return "none"
	}
	s := fmt.Sprintf("%d (%s", n, strings.Join(first, ", "))
	if n > shown {
		s += ", ..."
	}
	return s + ")"
}
