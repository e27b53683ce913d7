// Package concurrency holds real-kernel tests of rdssock under concurrent
// use: many goroutines on shared sockets, and Close racing reads, writes
// and batches. Its rdsvm.json asks for the race detector, so rdstest runs
// these tests with go test -race inside the VM.
package concurrency
