// Package barrierlink gives package rdmaops the parts of a barrier.Tracker
// that a goroutine reading the socket on behalf of a waiter needs, without
// making them public API. Package barrier fills the functions in its init.
package barrierlink

import "time"

// Functions set by package barrier; t is a *barrier.Tracker.
var (
	// NextDeadline returns the earliest deadline of a pending operation
	// on the Clock (see ClockTime), 0 if none. For an operation whose
	// deadline is not stamped yet (Config.Timeout) it is a time no later
	// than the one it will get: a reader that sleeps until then may wake
	// early, never late.
	NextDeadline func(t any) int64

	// Poll reports, under one lock, whether a wait for tok (all: for the
	// high-water mark to reach tok) is satisfied, and NextDeadline.
	Poll func(t any, tok uint64, all bool) (done bool, next int64)

	// Expire times out the pending operations whose deadline passed.
	Expire func(t any)

	// Watch registers a waiter for tok (all: for the high-water mark to
	// reach tok). done reports that it is satisfied already; otherwise ch
	// is closed when it is, and Unwatch(t, w) must follow.
	Watch   func(t any, tok uint64, all bool) (ch <-chan struct{}, w any, done bool)
	Unwatch func(t any, w any)

	// BeginLane begins an operation in lane (its destination): sent
	// without a status request (unsignaled; call Sent once its sendmsg
	// returned) or with one, sealing the lane: its kernel status then
	// completes, as barrier.Covered, the lane's operations sent before.
	// rel is a barrier.Releaser or nil.
	BeginLane func(t any, deadline time.Time, keep any, rel any, lane uint32, unsignaled bool) uint64

	// Sent records that an unsignaled operation's sendmsg returned 0.
	Sent func(t any, tok uint64)

	// CancelLane is Tracker.Cancel for the destination of lane; once
	// cancel returns it also covers the lane's operations sent before.
	CancelLane func(t any, lane uint32, cancel func() error) error

	// Timeout returns the tracker's timeout for an operation begun
	// without a deadline of its own (Config.Timeout), 0 if none.
	Timeout func(t any) time.Duration

	// Unsealed reports whether waiting for tok (all: for the mark to
	// reach tok) needs an unsignaled operation that nothing would
	// complete.
	Unsealed func(t any, tok uint64, all bool) bool
)

// The trackers' clock: nanoseconds since clockBase on the monotonic clock,
// never 0 in practice. Reading it costs one clock read (time.Now costs
// two: the wall clock too), and a time.Time made from it carries the
// monotonic reading, so time.Until on it costs one read as well.
var clockBase = time.Now()

// Clock returns the trackers' time now.
func Clock() int64 { return int64(time.Since(clockBase)) }

// ClockOf converts t to the trackers' clock.
func ClockOf(t time.Time) int64 { return int64(t.Sub(clockBase)) }

// ClockTime converts a time on the trackers' clock to a time.Time.
func ClockTime(ns int64) time.Time { return clockBase.Add(time.Duration(ns)) }
