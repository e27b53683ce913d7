//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/netlinkcfg"
)

// rdsTCPPort is the TCP port RDS/TCP listens on (RDS_TCP_PORT).
const rdsTCPPort = 16385

// tcpBacklog sums the bytes the RDS/TCP sockets of the calling thread's
// network namespace hold: sent but not yet acknowledged (tx_queue) and
// received but not yet consumed by RDS (rx_queue), from
// /proc/thread-self/net/tcp and tcp6.
func tcpBacklog() (int64, error) {
	var total int64
	for _, name := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile("/proc/thread-self/net/" + name)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6
			}
			return 0, err
		}
		n, err := parseTCPBacklog(data, rdsTCPPort)
		if err != nil {
			return 0, fmt.Errorf("/proc/net/%s: %w", name, err)
		}
		total += n
	}
	return total, nil
}

// parseTCPBacklog sums tx_queue and rx_queue over the rows of a
// /proc/net/tcp table whose local or remote port is port.
func parseTCPBacklog(data []byte, port uint16) (int64, error) {
	var total int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	first := true
	for sc.Scan() {
		if first {
			first = false // header
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		if !hasPort(f[1], port) && !hasPort(f[2], port) {
			continue
		}
		tx, rx, ok := strings.Cut(f[4], ":")
		if !ok {
			return 0, fmt.Errorf("bad queue field %q", f[4])
		}
		for _, q := range []string{tx, rx} {
			v, err := strconv.ParseInt(q, 16, 64)
			if err != nil {
				return 0, fmt.Errorf("bad queue field %q", f[4])
			}
			total += v
		}
	}
	return total, sc.Err()
}

// hasPort reports whether a /proc/net/tcp address ("0100007F:4001")
// carries port.
func hasPort(addr string, port uint16) bool {
	_, p, ok := strings.Cut(addr, ":")
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(p, 16, 16)
	return err == nil && uint16(v) == port
}

// settleLimit bounds how long a run waits for RDS/TCP to drain.
const settleLimit = 30 * time.Second

// settleTCP waits until the RDS/TCP sockets in both namespaces of the
// topology hold no data, so that a run does not start behind the
// previous run's backlog: a sender killed at the end of its run leaves
// what it had handed to TCP (up to the TCP send buffer, megabytes), and
// the next run's messages would queue behind it on the same connection.
// It returns how long it waited and the backlog it found first.
func settleTCP() (waited time.Duration, backlog int64, err error) {
	peer, err := netlinkcfg.OpenNamespace(vmtest.PeerNamespaceName)
	if err != nil {
		return 0, 0, err
	}
	defer peer.Close()
	start := time.Now()
	for i := 0; ; i++ {
		local, err := tcpBacklog()
		if err != nil {
			return 0, 0, err
		}
		var remote int64
		if err := peer.Do(func() (err error) { remote, err = tcpBacklog(); return err }); err != nil {
			return 0, 0, err
		}
		if i == 0 {
			backlog = local + remote
		}
		if local+remote == 0 {
			return time.Since(start), backlog, nil
		}
		if time.Since(start) > settleLimit {
			return time.Since(start), backlog, fmt.Errorf("RDS/TCP still holds %d bytes after %v", local+remote, settleLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
