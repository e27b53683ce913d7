// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

//go:build linux

package cmsg_test

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-rds/rds/cmsg"
)

// Build the control data of an RDMA WRITE request into a reusable buffer.
func Example_builder() {
	oob := make([]byte, 0, cmsg.RDMAArgsSpace)

	b := cmsg.NewBuilder(oob)
	b.RDMAArgs(cmsg.RDMAArgs{
		Cookie:       cmsg.MakeCookie(0x1234, 0), // from the peer's RDMA_DEST
		Remote:       cmsg.IOVec{Addr: 0, Bytes: 4096},
		LocalVecAddr: 0x7f0000001000, // address of an []rdsabi.Iovec, kept alive
		NumLocal:     1,
		Flags:        cmsg.FlagReadWrite | cmsg.FlagNotifyMe,
		UserToken:    42,
	})
	buf, err := b.Finish()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(buf) == cmsg.RDMAArgsSpace, "(72 bytes on 64-bit Linux); reused the buffer:", &buf[0] == &oob[:1][0])
	// Output: true (72 bytes on 64-bit Linux); reused the buffer: true
}

// Walk what recvmsg returned: here, a 0-byte read carrying two RDMA
// completion notices (built with the Builder, as a fake kernel would).
func Example_parser() {
	b := cmsg.NewBuilder(make([]byte, 0, cmsg.MaxReceiveSpace))
	b.RDMAStatus(cmsg.Notify{UserToken: 42, Status: cmsg.StatusSuccess})
	b.RDMAStatus(cmsg.Notify{UserToken: 43, Status: cmsg.StatusRemoteError})
	oob, _ := b.Finish()

	p := cmsg.NewParser(oob)
	for {
		m, err := p.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if m.Is(cmsg.LevelRDS, cmsg.TypeRDMAStatus) {
			n, err := m.RDMAStatus()
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("token %d: %v\n", n.UserToken, n.Status)
		}
	}
	// Output:
	// token 42: success
	// token 43: remote error
}

// Dispatch on the message type of a data receive.
func ExampleMessage_ZeroCopyCompletion() {
	b := cmsg.NewBuilder(nil)
	b.ZeroCopyCompletion(cmsg.ZeroCopyCookies{N: 2, Cookies: [8]uint32{7, 9}})
	b.Timestamp(cmsg.Timeval{Sec: 1700000000, Usec: 5})
	oob, _ := b.Finish()

	p := cmsg.NewParser(oob)
	for m, err := p.Next(); err == nil; m, err = p.Next() {
		switch {
		case m.Is(cmsg.LevelRDS, cmsg.TypeZeroCopyCompletion):
			z, _ := m.ZeroCopyCompletion()
			fmt.Println("sends done:", z.List())
		case m.Level == cmsg.LevelSocket:
			tv, _ := m.Timestamp()
			fmt.Println("received at", tv.Time().UTC().Format("2006-01-02 15:04:05.000000"))
		}
	}
	// Output:
	// sends done: [7 9]
	// received at 2023-11-14 22:13:20.000005
}

// Malformed input yields an error, never a panic.
func ExampleParser_Next_malformed() {
	b := cmsg.NewBuilder(nil)
	b.Append(cmsg.LevelRDS, cmsg.TypeRDMAStatus, make([]byte, 64-cmsg.HeaderLen)) // cmsg_len 64
	oob, _ := b.Finish()
	p := cmsg.NewParser(oob[:cmsg.HeaderLen]) // cut short after the header
	_, err := p.Next()
	fmt.Println(errors.Is(err, cmsg.ErrOverrun))
	fmt.Println(err)
	// Output:
	// true
	// cmsg: cmsg_len runs past the end of the buffer at offset 0 (level 276, type 4, length 64)
}

func ExampleSpace() {
	// Size one buffer for a send carrying an RDMA_MAP, a zero-copy cookie
	// and a 5-byte message this package has no method for.
	oob := make([]byte, 0, cmsg.RDMAMapSpace+cmsg.ZeroCopyCookieSpace+cmsg.Space(5))

	b := cmsg.NewBuilder(oob)
	b.RDMAMap(cmsg.MapArgs{Vec: cmsg.IOVec{Addr: 0x7f0000400000, Bytes: 4096}})
	b.ZeroCopyCookie(1)
	b.Append(cmsg.LevelRDS, 99, []byte("hello"))
	buf, _ := b.Finish()
	fmt.Println(len(buf) == cap(oob), &buf[0] == &oob[:1][0])
	// Output: true true
}

func ExampleMakeCookie() {
	c := cmsg.MakeCookie(0xabc, 0x10)
	fmt.Printf("%#x %v\n", uint64(c), c)
	// Output: 0x1000000abc rkey=0xabc offset=0x10
}

func ExampleBuilder_CongUpdate() {
	// What the kernel sends when port groups 0 and 5 become uncongested.
	b := cmsg.NewBuilder(nil)
	b.CongUpdate(1<<0 | 1<<5)
	oob, _ := b.Finish()
	p := cmsg.NewParser(oob)
	m, _ := p.Next()
	mask, _ := m.CongUpdate()
	fmt.Printf("CongUpdateSpace: %t, mask %#x\n", len(oob) == cmsg.CongUpdateSpace, mask)
	// Output: CongUpdateSpace: true, mask 0x21
}

// Read the receive-path trace of a message (SO_RDS_MSG_RXPATH_LATENCY on
// the socket), here built as the kernel would send it.
func ExampleMessage_RxPathLatency() {
	b := cmsg.NewBuilder(make([]byte, 0, cmsg.RxPathLatencySpace))
	b.RxPathLatency(cmsg.RxTrace{
		Count:   2,
		Points:  [cmsg.MaxTracePoints]cmsg.TracePoint{cmsg.TraceDgramReassemble, cmsg.TraceDgramDelivered},
		Latency: [cmsg.MaxTracePoints]time.Duration{35 * time.Microsecond, 2 * time.Millisecond},
	})
	oob, _ := b.Finish()

	p := cmsg.NewParser(oob)
	m, _ := p.Next()
	tr, err := m.RxPathLatency()
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range tr.Count {
		fmt.Printf("%v: %v\n", tr.Points[i], tr.Latency[i])
	}
	// Output:
	// dgram-reassemble: 35µs
	// dgram-delivered: 2ms
}
