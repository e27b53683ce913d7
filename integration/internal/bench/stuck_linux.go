//go:build linux

package bench

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
	"github.com/go-rds/rds/rdssock"
)

// stuckMessages describes, after a tools round over RDS/TCP failed, the
// messages of the run's ports (lo to hi) that the kernel still holds in
// each namespace: queued for sending, sent and not yet acknowledged, or
// received and not yet read. It tells a message stuck on its way (a path
// that stopped moving) from one that arrived and went unanswered. A
// process that has exited shows nothing of its own: closing an RDS socket
// drops what it still had queued.
func stuckMessages(lo, hi uint16) string {
	var parts []string
	local, err := queuedOn(lo, hi)
	parts = append(parts, "initial namespace: "+orErr(local, err))
	peer, err := netlinkcfg.OpenNamespace(vmtest.PeerNamespaceName)
	if err == nil {
		var remote string
		err = peer.Do(func() (err error) { remote, err = queuedOn(lo, hi); return err })
		peer.Close()
		parts = append(parts, "peer namespace: "+orErr(remote, err))
	} else {
		parts = append(parts, "peer namespace: "+err.Error())
	}
	return "RDS messages of the run's ports still in the kernel: " + strings.Join(parts, "; ")
}

func orErr(s string, err error) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// queuedOn lists the kernel's queues in the current namespace for the
// messages with a local or remote port in [lo, hi].
func queuedOn(lo, hi uint16) (string, error) {
	c, err := rdssock.Listen(netip.AddrPortFrom(vmtest.Loopback4, 0), nil)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var parts []string
	for _, q := range []struct {
		name string
		q    rdssock.MessageQueue
	}{{"send", rdssock.SendQueue}, {"retransmit", rdssock.RetransmitQueue}, {"receive", rdssock.ReceiveQueue}} {
		ms, err := c.Messages(q.q)
		if err != nil {
			return "", fmt.Errorf("%s queue: %w", q.name, err)
		}
		parts = append(parts, q.name+" "+describeQueued(ms, lo, hi))
	}
	return strings.Join(parts, ", "), nil
}
