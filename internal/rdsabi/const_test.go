// Copyright 2025 The go-rds Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license that can be
// found in the LICENSE file.

package rdsabi

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goNames maps every integer macro and enumerator of <linux/rds.h> to the
// Go constant that stands for it; the values were copied by hand.
var goNames = map[string]int64{
	"RDS_IB_ABI_VERSION":                  IBABIVersion,
	"SOL_RDS":                             SOL,
	"RDS_CANCEL_SENT_TO":                  OptCancelSentTo,
	"RDS_GET_MR":                          OptGetMR,
	"RDS_FREE_MR":                         OptFreeMR,
	"RDS_RECVERR":                         OptRecvErr,
	"RDS_CONG_MONITOR":                    OptCongMonitor,
	"RDS_GET_MR_FOR_DEST":                 OptGetMRForDest,
	"SO_RDS_TRANSPORT":                    OptTransport,
	"SO_RDS_MSG_RXPATH_LATENCY":           OptRxPathLatency,
	"RDS_TRANS_IB":                        TransIB,
	"RDS_TRANS_GAP":                       TransGap,
	"RDS_TRANS_TCP":                       TransTCP,
	"RDS_TRANS_COUNT":                     TransCount,
	"RDS_TRANS_NONE":                      int64(TransNone) - 1<<32, // (~0) is the int -1
	"RDS_TRANS_IWARP":                     TransIWARP,
	"SIOCRDSSETTOS":                       IoctlSetTOS,
	"SIOCRDSGETTOS":                       IoctlGetTOS,
	"RDS_CMSG_RDMA_ARGS":                  CmsgRDMAArgs,
	"RDS_CMSG_RDMA_DEST":                  CmsgRDMADest,
	"RDS_CMSG_RDMA_MAP":                   CmsgRDMAMap,
	"RDS_CMSG_RDMA_STATUS":                CmsgRDMAStatus,
	"RDS_CMSG_CONG_UPDATE":                CmsgCongUpdate,
	"RDS_CMSG_ATOMIC_FADD":                CmsgAtomicFADD,
	"RDS_CMSG_ATOMIC_CSWP":                CmsgAtomicCSWP,
	"RDS_CMSG_MASKED_ATOMIC_FADD":         CmsgMaskedAtomicFADD,
	"RDS_CMSG_MASKED_ATOMIC_CSWP":         CmsgMaskedAtomicCSWP,
	"RDS_CMSG_RXPATH_LATENCY":             CmsgRxPathLatency,
	"RDS_CMSG_ZCOPY_COOKIE":               CmsgZcopyCookie,
	"RDS_CMSG_ZCOPY_COMPLETION":           CmsgZcopyCompletion,
	"RDS_INFO_FIRST":                      InfoFirst,
	"RDS_INFO_COUNTERS":                   InfoCounters,
	"RDS_INFO_CONNECTIONS":                InfoConnections,
	"RDS_INFO_SEND_MESSAGES":              InfoSendMessages,
	"RDS_INFO_RETRANS_MESSAGES":           InfoRetransMessages,
	"RDS_INFO_RECV_MESSAGES":              InfoRecvMessages,
	"RDS_INFO_SOCKETS":                    InfoSockets,
	"RDS_INFO_TCP_SOCKETS":                InfoTCPSockets,
	"RDS_INFO_IB_CONNECTIONS":             InfoIBConnections,
	"RDS_INFO_CONNECTION_STATS":           InfoConnectionStats,
	"RDS_INFO_IWARP_CONNECTIONS":          InfoIWARPConnections,
	"RDS6_INFO_CONNECTIONS":               Info6Connections,
	"RDS6_INFO_SEND_MESSAGES":             Info6SendMessages,
	"RDS6_INFO_RETRANS_MESSAGES":          Info6RetransMessages,
	"RDS6_INFO_RECV_MESSAGES":             Info6RecvMessages,
	"RDS6_INFO_SOCKETS":                   Info6Sockets,
	"RDS6_INFO_TCP_SOCKETS":               Info6TCPSockets,
	"RDS6_INFO_IB_CONNECTIONS":            Info6IBConnections,
	"RDS_INFO_LAST":                       InfoLast,
	"RDS_INFO_CONNECTION_FLAG_SENDING":    InfoConnFlagSending,
	"RDS_INFO_CONNECTION_FLAG_CONNECTING": InfoConnFlagConnecting,
	"RDS_INFO_CONNECTION_FLAG_CONNECTED":  InfoConnFlagConnected,
	"TRANSNAMSIZ":                         TransNameSize,
	"RDS_INFO_MESSAGE_FLAG_ACK":           InfoMsgFlagAck,
	"RDS_INFO_MESSAGE_FLAG_FAST_ACK":      InfoMsgFlagFastAck,
	"RDS_IB_GID_LEN":                      IBGIDLen,
	"RDS_MSG_RX_HDR_TO_DGRAM_START":       RxHdrToDgramStart,
	"RDS_MSG_RX_DGRAM_REASSEMBLE":         RxDgramReassemble,
	"RDS_MSG_RX_DGRAM_DELIVERED":          RxDgramDelivered,
	"RDS_MSG_RX_DGRAM_TRACE_MAX":          RxDgramTraceMax,
	"RDS_CONG_MONITOR_SIZE":               CongMonitorSize,
	"RDS_RDMA_SUCCESS":                    RDMASuccess,
	"RDS_RDMA_REMOTE_ERROR":               RDMARemoteError,
	"RDS_RDMA_CANCELED":                   RDMACanceled,
	"RDS_RDMA_DROPPED":                    RDMADropped,
	"RDS_RDMA_OTHER_ERROR":                RDMAOtherError,
	"RDS_MAX_ZCOOKIES":                    MaxZcookies,
	"RDS_RDMA_READWRITE":                  RDMAReadWrite,
	"RDS_RDMA_FENCE":                      RDMAFence,
	"RDS_RDMA_INVALIDATE":                 RDMAInvalidate,
	"RDS_RDMA_USE_ONCE":                   RDMAUseOnce,
	"RDS_RDMA_DONTWAIT":                   RDMADontWait,
	"RDS_RDMA_NOTIFY_ME":                  RDMANotifyMe,
	"RDS_RDMA_SILENT":                     RDMASilent,
}

// TestConstantsLiteral checks values that are easy to get wrong against
// numbers read off the header by hand.
func TestConstantsLiteral(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"Family", Family, 21},
		{"SOL", SOL, 276},
		{"OptTransport", OptTransport, 8},
		{"OptRxPathLatency", OptRxPathLatency, 10},
		{"TransNone", int64(TransNone), 0xffffffff},
		{"TransLoop", TransLoop, 3},
		{"IoctlSetTOS", IoctlSetTOS, 0x89e0},
		{"IoctlGetTOS", IoctlGetTOS, 0x89e1},
		{"CmsgRxPathLatency", CmsgRxPathLatency, 11},
		{"CmsgZcopyCompletion", CmsgZcopyCompletion, 13},
		{"Info6IBConnections", Info6IBConnections, 10017},
		{"MaxMessageSize", MaxMessageSize, 1048576},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

var (
	defineRE     = regexp.MustCompile(`^#define\s+([A-Z0-9_]+)\s+(.+?)\s*(/\*.*)?$`)
	enumeratorRE = regexp.MustCompile(`^\s+(RDS_MSG_RX_[A-Z_]+)(\s*=\s*(\d+))?,?\s*$`)
)

// TestConstantsMatchHeader reads the installed <linux/rds.h> and checks
// that every integer macro and enumerator has a Go constant of the same
// value, so a newer header with new names makes this test fail.
func TestConstantsMatchHeader(t *testing.T) {
	const path = "/usr/include/linux/rds.h"
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		t.Skipf("%s not installed (Debian: linux-libc-dev)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Values the header takes from elsewhere.
	vals := map[string]int64{"SIOCPROTOPRIVATE": 0x89e0}
	seen := 0
	enumNext := int64(0)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := enumeratorRE.FindStringSubmatch(line); m != nil {
			if m[3] != "" {
				enumNext, _ = strconv.ParseInt(m[3], 10, 64)
			}
			vals[m[1]] = enumNext
			enumNext++
			check(t, goNames, m[1], enumNext-1)
			seen++
			continue
		}
		m := defineRE.FindStringSubmatch(line)
		if m == nil || strings.Contains(m[1], "(") || strings.HasSuffix(m[1], "_H") {
			continue
		}
		name, expr := m[1], strings.Trim(m[2], "() \t")
		if strings.HasPrefix(expr, "(") || strings.Contains(line, m[1]+"(") {
			continue // function-like macro
		}
		v, ok := evalExpr(expr, vals)
		if !ok {
			continue // not an integer (e.g. a type)
		}
		vals[name] = v
		check(t, goNames, name, v)
		seen++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(goNames) {
		t.Errorf("header has %d integer names, the Go table %d", seen, len(goNames))
	}
}

func check(t *testing.T, table map[string]int64, name string, want int64) {
	t.Helper()
	got, ok := table[name]
	if !ok {
		t.Errorf("%s = %d in the header has no Go constant", name, want)
		return
	}
	if got != want {
		t.Errorf("Go constant for %s = %d, header says %d", name, got, want)
	}
}

// evalExpr evaluates the few expression forms rds.h uses: a number, ~0,
// another macro's name, and NAME + number.
func evalExpr(expr string, vals map[string]int64) (int64, bool) {
	expr = strings.TrimSpace(expr)
	if expr == "~0" {
		return ^int64(0), true
	}
	if i := strings.Index(expr, "+"); i > 0 {
		a, ok1 := evalExpr(strings.Trim(expr[:i], "() "), vals)
		b, ok2 := evalExpr(strings.Trim(expr[i+1:], "() "), vals)
		return a + b, ok1 && ok2
	}
	if v, err := strconv.ParseInt(expr, 0, 64); err == nil {
		return v, true
	}
	v, ok := vals[expr]
	return v, ok
}
