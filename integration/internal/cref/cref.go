// Package cref runs the plain C reference programs of
// integration/internal/bench/cbaseline that integration tests put beside the
// Go code in the same VM run: a kernel deviation a test accepts must show in
// C too (see TESTING.md).
package cref

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"
)

// ProbeResult is what rdsfault-c's congestion probe saw.
type ProbeResult int

const (
	// ProbeSent: the kernel took the probe message.
	ProbeSent ProbeResult = iota
	// ProbeCongested: the kernel refused it with ENOBUFS, the port being
	// marked congested in its map.
	ProbeCongested
)

func (r ProbeResult) String() string {
	if r == ProbeCongested {
		return "congested"
	}
	return "sent"
}

// ProbeCongestion runs bin (rdsfault-c, built from
// integration/internal/bench/cbaseline/rdsfault.c) in probe mode: a new C
// socket bound to from, in the network namespace named by the file ns ("" for
// the caller's), sends one empty message to to with MSG_DONTWAIT. Any other
// outcome than sent or refused as congested is an error.
func ProbeCongestion(bin, ns string, from netip.Addr, to netip.AddrPort) (ProbeResult, error) {
	args := []string{fmt.Sprintf("probe=%d", to.Port()), "local=" + from.Unmap().String(), "peer=" + to.Addr().Unmap().String()}
	out, err := runFault(bin, ns, args)
	if err != nil {
		return 0, err
	}
	return parseProbe(out)
}

// runFault runs bin (rdsfault-c) with args, its sending sockets in the
// network namespace named by the file ns ("" for the caller's), and
// returns its output.
func runFault(bin, ns string, args []string) (string, error) {
	if ns != "" {
		args = append(args, "sendns="+ns)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// parseProbe reads the RDSFAULT-PROBE line of the probe's output.
func parseProbe(out string) (ProbeResult, error) {
	for _, l := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "RDSFAULT-PROBE|")
		if !ok {
			continue
		}
		switch {
		case rest == "result=congested":
			return ProbeCongested, nil
		case rest == "result=sent":
			return ProbeSent, nil
		default:
			return 0, fmt.Errorf("C congestion probe: %s", rest)
		}
	}
	return 0, fmt.Errorf("C congestion probe printed no result: %q", out)
}

// PingResult is what rdsfault-c's path check saw.
type PingResult struct {
	Sockets  int           // new sockets that pinged
	Answered int           // of them, those the peer's kernel answered
	Slowest  time.Duration // from the start until the last answer came
}

// Unanswered is how many of the sockets got no answer.
func (r PingResult) Unanswered() int { return r.Sockets - r.Answered }

// PingPaths runs bin (rdsfault-c) in ping mode: n new C sockets bound to
// from, in the network namespace named by the file ns ("" for the
// caller's), each ping to's kernel (an empty message to port 0) every
// second until it answers or limit passes. A socket's messages take the
// path its port hashes to, so n sockets reach every path of a multipath
// RDS/TCP connection with high probability.
func PingPaths(bin, ns string, from, to netip.Addr, n int, limit time.Duration) (PingResult, error) {
	args := []string{fmt.Sprintf("ping=%d", n), "local=" + from.Unmap().String(), "peer=" + to.Unmap().String(),
		fmt.Sprintf("limit_ms=%d", limit.Milliseconds())}
	out, err := runFault(bin, ns, args)
	if err != nil {
		return PingResult{}, err
	}
	return parsePing(out)
}

// parsePing reads the RDSFAULT-PING line of the path check's output.
func parsePing(out string) (PingResult, error) {
	for _, l := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "RDSFAULT-PING|")
		if !ok {
			continue
		}
		var r PingResult
		var ms int64
		if _, err := fmt.Sscanf(rest, "sockets=%d|answered=%d|slowest_ms=%d", &r.Sockets, &r.Answered, &ms); err != nil {
			return PingResult{}, fmt.Errorf("C path check: %q: %w", rest, err)
		}
		if r.Sockets <= 0 || r.Answered < 0 || r.Answered > r.Sockets || ms < 0 {
			return PingResult{}, fmt.Errorf("C path check: inconsistent counts: %q", rest)
		}
		r.Slowest = time.Duration(ms) * time.Millisecond
		return r, nil
	}
	return PingResult{}, fmt.Errorf("C path check printed no result: %q", out)
}
