//go:build linux

package rdssock

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// tcpPaths is how many TCP connections (paths) an RDS/TCP connection
// between two multipath-capable kernels uses (RDS_MPATH_WORKERS).
const tcpPaths = 8

// WarmUp brings the RDS connection from local to peer fully up before an
// application sends data on it, and returns once it is: it pings peer from
// a temporary socket bound to local (with cfg's namespace, transport and
// TOS, which select the connection) until the kernel answers, and on
// RDS/TCP it then waits until every path of the connection has its TCP
// connection, or the count has stopped growing for half a second (a peer
// without multipath uses one path). The application's own sockets and
// their queues are not touched.
//
// It works around a defect in Linux up to at least 6.12: while the paths
// of a new RDS/TCP connection are being set up, the accepting kernel can
// reset a TCP connection that already carried messages its TCP had
// acknowledged, and those messages are lost although the sender counted
// them delivered. Messages sent after WarmUp returned are not exposed to
// it, unless both hosts set up the same connection at the same moment.
// Nor are they reordered: before the handshake, the kernel sends a
// non-blocking socket's messages on path 0 and switches to the socket's
// own path afterwards, so early messages can be overtaken.
func WarmUp(ctx context.Context, local, peer netip.Addr, cfg *Config) error {
	c, err := Listen(netip.AddrPortFrom(local, 0), cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	target := netip.AddrPortFrom(peer, 0)
	buf := make([]byte, 64)
	for answered := false; !answered; {
		if _, err := c.WriteMsgContext(ctx, nil, nil, target); err != nil && !errors.Is(err, ErrCongested) {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		for !answered {
			n, _, _, from, err := c.ReadMsgContext(rctx, buf, nil)
			if err != nil {
				break
			}
			answered = n == 0 && from == target
		}
		cancel()
		if !answered && ctx.Err() != nil {
			return fmt.Errorf("rdssock: warm-up %v -> %v: no ping reply: %w", local, peer, ctx.Err())
		}
	}
	if tr, err := c.Transport(); err != nil || tr != TransportTCP {
		return err
	}
	last, since := -1, time.Now()
	for {
		socks, err := c.TCPSockets6()
		if err != nil {
			return err
		}
		n := 0
		for _, s := range socks {
			l, r := s.Local.Addr().Unmap(), s.Peer.Addr().Unmap()
			if l == local.Unmap() && r == peer.Unmap() || l == peer.Unmap() && r == local.Unmap() {
				n++
			}
		}
		switch {
		case n >= tcpPaths:
			return nil
		case n != last:
			last, since = n, time.Now()
		case n > 0 && time.Since(since) >= 500*time.Millisecond:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rdssock: warm-up %v -> %v: %d of %d TCP paths up: %w", local, peer, n, tcpPaths, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
