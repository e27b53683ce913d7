// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg

import (
	"errors"
	"fmt"
)

// Sentinel errors; the errors this package returns wrap one of them in an
// *Error, so test with errors.Is.
var (
	// ErrShortHeader: bytes remain in the buffer, but fewer than a header.
	ErrShortHeader = errors.New("cmsg: truncated control message header")
	// ErrHeaderLen: cmsg_len is smaller than the header itself.
	ErrHeaderLen = errors.New("cmsg: cmsg_len shorter than the header")
	// ErrOverrun: cmsg_len reaches past the end of the buffer.
	ErrOverrun = errors.New("cmsg: cmsg_len runs past the end of the buffer")
	// ErrDataLen: the data length does not match the message type (a
	// message the kernel cut short sets MSG_CTRUNC and shows up here).
	ErrDataLen = errors.New("cmsg: wrong data length for the message type")
	// ErrWrongType: a decoder was applied to a message of another level
	// or type.
	ErrWrongType = errors.New("cmsg: message has a different level or type")
	// ErrInvalid: a field value is out of range: more than
	// MaxZeroCopyCookies cookies or MaxTracePoints trace points, or, on
	// 32-bit ABIs, a time that the 32-bit fields of SCM_TIMESTAMP
	// (Builder.Timestamp) cannot hold.
	ErrInvalid = errors.New("cmsg: field value out of range")
)

// Error describes a malformed control message or a misuse of the codec.
// It is only allocated when something is wrong.
type Error struct {
	Err    error // one of the sentinel errors above
	Offset int   // byte offset of the message in the buffer, or -1 if unknown
	Level  int32 // cmsg_level, when known
	Type   int32 // cmsg_type, when known
	Len    int   // the offending length: cmsg_len, data length or count
}

func (e *Error) Error() string {
	s := e.Err.Error()
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	return s + fmt.Sprintf(" (level %d, type %d, length %d)", e.Level, e.Type, e.Len)
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }
