// Package integration holds the tests that prove the rdsvm VM harness works
// on a real kernel: AF_RDS sockets, every topology the guest promises
// (loopback, RDS/TCP across network namespaces, RDS/IB over Soft-RoCE) and
// RDS ping. They carry the build tag "integration" and run only inside the
// VM; see TESTING.md at the repository root and the rdstest command.
package integration
