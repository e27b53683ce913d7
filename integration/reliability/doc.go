// Package reliability holds real-kernel tests of RDS/TCP's delivery
// promise: every message the sender's kernel accepted arrives exactly once,
// in order per sender/receiver pair, and intact, or its loss is accounted
// for by the kernel.
//
// The tests run only inside the rdsvm harness (build tag integration; see
// TESTING.md at the repository root). They use the one-VM topology: RDS/TCP
// between the initial network namespace and the namespace "rdspeer" over a
// veth pair, over IPv4 and IPv6. Faults are injected on that pair:
//
//   - TestLossyLinks: tc netem loss, delay, duplication, corruption and
//     reordering, each alone and all combined, in both directions;
//   - TestLinkFailure: the link set down and up mid-stream, once with the
//     TCP connections surviving and once with every RDS/TCP connection
//     reset while the link is down (RDS reconnects and retransmits);
//   - TestReceiverReopen: the receiving socket closed and bound again
//     mid-stream, with the kernel counters that account for what was lost;
//   - TestCongestion: a slow receiver with a small receive buffer, senders
//     that meet ErrCongested and wait for RDS_CMSG_CONG_UPDATE, and
//     CancelSentTo on a queue held back by a blocked link;
//   - TestFreshConnection: numbered messages sent with no warm-up on
//     brand-new RDS/TCP connections (a new address pair each time).
//
// Every test logs one line per fault, for a summary table:
//
//	RELIABILITY|<fault>|kernel=<release>|sent=<n>|accepted=<n>|received=<n>|dup=<n>|reordered=<n>|corrupt=<n>|lost=<n>|outcome=<text>
//
// and one line per kernel deviation a test accepted (see deviation in
// reliability_test.go):
//
//	DEVIATION|<signature>|kernel=<release>|test=<name>|go=<n>|bound=<n>|c=<n>|basis=<bounds|c|none>|strict=<0|1>
//
// TestLinkFailure and TestFreshConnection run the C flow of
// integration/internal/bench/cbaseline/rdsfault.c beside the Go one, under
// the same fault; it must be built on the host first: rdstest does it before
// the integration stage; by hand, go generate ./integration/reliability (gcc
// and a static libc). Without it the tests fail.
package reliability

// TestLinkFailure runs the C flow of
// integration/internal/bench/cbaseline/rdsfault.c beside the Go one, under
// the same fault; the VM has no compiler, so build it here.
//go:generate sh -c "mkdir -p testdata && gcc -O2 -static -Wall -Wextra -Werror -o testdata/rdsfault-c ../internal/bench/cbaseline/rdsfault.c"
