// Package rdmafaults holds real-kernel fault tests of RDS RDMA in one VM
// (run them with the rdsvm harness, build tag integration): how long a
// freed key keeps working, use-once keys, the pool's quarantine, what a
// registration exposes, bogus and stale cookies and how long the
// connection takes to come back, and closing a socket with RDMA
// operations in flight, and signaling only every 8th operation
// (TestNthSignal*: no fault, with steady-state allocations; a bogus cookie
// among unsignaled WRITEs, or on the notified one). Each test logs one
// RELIABILITY line per fault.
package rdmafaults
