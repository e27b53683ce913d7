// Package rdmafaults holds real-kernel fault tests of RDS RDMA in one VM
// (run them with the rdsvm harness, build tag integration): how long a
// freed key keeps working, use-once keys, the pool's quarantine, what a
// registration exposes, bogus and stale cookies and how long the
// connection takes to come back, and closing a socket with RDMA
// operations in flight, and signaling only every 8th operation
// (TestNthSignal*: no fault, with steady-state allocations; a bogus cookie
// among unsignaled WRITEs, or on the notified one). Each test logs one
// RELIABILITY line per fault.
//
// Writes into a dead key are judged against the plain C reference
// integration/internal/bench/cbaseline/useonce.c, run in the same VM on
// the same connections once a Go write deviates; it must be built on the
// host first: rdstest does it; by hand,
// go generate ./integration/rdmafaults (gcc and a static libc). Without it
// the tests that need it fail. A dead-key deviation that C does not show
// fails the test; RDSTEST_RELIABILITY_STRICT=0 only reports it (see
// TESTING.md).
package rdmafaults

// The VM has no compiler: build the C reference here.
//go:generate sh -c "mkdir -p testdata && gcc -O2 -static -Wall -Wextra -Werror -o testdata/useonce-c ../internal/bench/cbaseline/useonce.c"
