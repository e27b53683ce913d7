// Package barrierlink gives package rdmaops the parts of a barrier.Tracker
// that a goroutine reading the socket on behalf of a waiter needs, without
// making them public API. Package barrier fills the functions in its init.
package barrierlink

// Functions set by package barrier; t is a *barrier.Tracker.
var (
	// NextDeadline returns the earliest deadline (UnixNano) of a pending
	// operation, 0 if none.
	NextDeadline func(t any) int64

	// Expire times out the pending operations whose deadline passed.
	Expire func(t any)

	// Watch registers a waiter for tok (all: for the high-water mark to
	// reach tok). done reports that it is satisfied already; otherwise ch
	// is closed when it is, and Unwatch(t, w) must follow.
	Watch   func(t any, tok uint64, all bool) (ch <-chan struct{}, w any, done bool)
	Unwatch func(t any, w any)
)
