// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

package cmsg

import (
	"fmt"

	"github.com/go-rds/rds/internal/rdsabi"
)

// This file builds on every system: rdssock.Config names trace points.

// TracePoint is a stage of the receive path (enum
// rds_message_rxpath_latency). For point i, net/rds/recv.c reports the
// time from stamp i to stamp i+1 of four local_clock() readings: 0 header
// seen, 1 header complete, 2 queued on the socket, 3 control messages
// written by recvmsg.
type TracePoint uint8

// Receive-path trace points. The loopback transport stamps neither the
// header nor its completion, so there point 0 is 0 and point 1 is
// meaningless (read from the source).
const (
	// TraceHdrToDgramStart: from the first bytes of the message's header
	// until the header was complete (on RDS/IB both are stamped as the
	// first fragment is handled).
	TraceHdrToDgramStart TracePoint = rdsabi.RxHdrToDgramStart
	// TraceDgramReassemble: from the complete header until the whole
	// message was queued on the receiving socket.
	TraceDgramReassemble TracePoint = rdsabi.RxDgramReassemble
	// TraceDgramDelivered: from being queued on the socket until the
	// recvmsg call that returns the message, after copying its data,
	// writes the control messages. A MSG_PEEK and the later read each
	// measure to their own call.
	TraceDgramDelivered TracePoint = rdsabi.RxDgramDelivered
	// MaxTracePoints is the number of trace points.
	MaxTracePoints = rdsabi.RxDgramTraceMax
)

// String returns the trace point name.
func (p TracePoint) String() string {
	switch p {
	case TraceHdrToDgramStart:
		return "hdr-to-dgram-start"
	case TraceDgramReassemble:
		return "dgram-reassemble"
	case TraceDgramDelivered:
		return "dgram-delivered"
	}
	return fmt.Sprintf("tracepoint(%d)", uint8(p))
}
