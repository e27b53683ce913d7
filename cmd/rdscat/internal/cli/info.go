//go:build linux

package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/go-rds/rds/internal/rdsabi"
	"github.com/go-rds/rds/internal/rdsinfo"
	"github.com/go-rds/rds/rdssock"
)

func init() {
	register(&command{
		name:    "info",
		summary: "print the kernel's RDS tables: counters, connections, queues, sockets",
		usage:   "[flags] [TABLE ...]",
		help: `Print the kernel's RDS information tables (the RDS_INFO_* and RDS6_INFO_*
getsockopt tables that rds-info shows) as aligned text or JSON. Without
TABLE arguments it prints every table this kernel provides; tables whose
module is not loaded are noted on standard error. The tables:

  counters            RDS statistics, global to the host
  connections(6)      connections with their flags and transport
  send-messages(6)    messages queued for sending
  retrans-messages(6) messages sent and not yet acknowledged
  recv-messages(6)    messages received and not yet read
  sockets(6)          bound RDS sockets
  tcp-sockets(6)      TCP sockets under RDS/TCP connections (rds_tcp)
  ib-connections(6)   InfiniBand/RoCE connections with GIDs and limits (rds_rdma)
  connection-stats    no mainline kernel provides it
  iwarp-connections   no mainline kernel provides it

The names ending in 6 are the RDS6 tables, which also list IPv4 peers (as
IPv4-mapped addresses). The kernel fills the addresses of the IPv4 send
and retransmit tables from the wrong bytes (they read 0.0.0.0): use their
6 twins. Connections, queues and sockets are those of the
network namespace (see -netns); counters are global. Connection flags:
s sending, c connecting, C connected.

Examples:
  rdscat info
  rdscat info connections counters
  rdscat info -json connections6
  rdscat info -netns peer sockets6
  rdscat info -list`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			o := &infoOpts{}
			fs.StringVar(&o.netns, "netns", "", "read the tables of the named network namespace (`NAME` as in ip netns)")
			fs.BoolVar(&o.json, "json", false, "print one JSON object with a member per table")
			fs.BoolVar(&o.list, "list", false, "list the table names and exit")
			fs.BoolVar(&o.nonzero, "nonzero", false, "omit counters that are zero")
			return o.run
		},
	})
}

type infoOpts struct {
	netns   string
	json    bool
	list    bool
	nonzero bool
}

// defaultTables are printed when no table is named: every table a mainline
// kernel can provide.
func defaultTables() []rdsinfo.Table {
	var ts []rdsinfo.Table
	for _, t := range rdsinfo.Tables() {
		if t != rdsinfo.ConnectionStats && t != rdsinfo.IWARPConnections {
			ts = append(ts, t)
		}
	}
	return ts
}

func (o *infoOpts) run(e *env, args []string) error {
	if o.list {
		if len(args) > 0 {
			return usagef("-list takes no table names")
		}
		for _, t := range rdsinfo.Tables() {
			fmt.Fprintln(e.stdout, t)
		}
		return nil
	}
	tables := defaultTables()
	explicit := len(args) > 0
	if explicit {
		tables = tables[:0]
		for _, a := range args {
			t, err := rdsinfo.Parse(a)
			if err != nil {
				return usagef("unknown table %q: run 'rdscat info -list' for the names", a)
			}
			tables = append(tables, t)
		}
	}
	sf := sockFlags{netns: o.netns}
	cfg, ns, err := sf.config()
	if err != nil {
		return err
	}
	c, err := rdssock.Socket(cfg)
	if ns != nil {
		ns.Close()
	}
	if err != nil {
		return err
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}

	out := map[string]any{}
	var order []string
	for _, t := range tables {
		rows, err := readTable(rc, t)
		if err != nil {
			if explicit {
				if errors.Is(err, syscall.ENOPROTOOPT) {
					return fmt.Errorf("table %v is not available: %w", t, err)
				}
				return fmt.Errorf("table %v: %w", t, err)
			}
			if errors.Is(err, syscall.ENOPROTOOPT) {
				fmt.Fprintf(e.stderr, "rdscat: skipping table %v: %v\n", t, err)
				continue
			}
			return fmt.Errorf("table %v: %w", t, err)
		}
		if t == rdsinfo.Counters && o.nonzero {
			cs := rows.([]counterRow)
			kept := cs[:0]
			for _, r := range cs {
				if r.Value != 0 {
					kept = append(kept, r)
				}
			}
			rows = kept
		}
		out[t.String()] = rows
		order = append(order, t.String())
	}
	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for i, name := range order {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		printTable(e.stdout, name, out[name])
	}
	return nil
}

// Rows of the JSON and text output. Field names are stable: scripts read them.
type (
	counterRow struct {
		Name  string `json:"name"`
		Value uint64 `json:"value"`
	}
	connectionRow struct {
		Local     netip.Addr `json:"local"`
		Remote    netip.Addr `json:"remote"`
		TOS       uint8      `json:"tos"`
		NextTxSeq uint64     `json:"next_tx_seq"`
		NextRxSeq uint64     `json:"next_rx_seq"`
		Flags     string     `json:"flags"`
		Transport string     `json:"transport"`
	}
	messageRow struct {
		Local  netip.AddrPort `json:"local"`
		Remote netip.AddrPort `json:"remote"`
		Seq    uint64         `json:"seq"`
		Len    uint32         `json:"len"`
		Flags  string         `json:"flags"`
		TOS    uint8          `json:"tos"`
	}
	socketRow struct {
		Bound         netip.AddrPort `json:"bound"`
		Connected     netip.AddrPort `json:"connected"`
		SendBuffer    uint32         `json:"sndbuf"`
		ReceiveBuffer uint32         `json:"rcvbuf"`
		Inode         uint64         `json:"inode"`
	}
	tcpSocketRow struct {
		Local           netip.AddrPort `json:"local"`
		Peer            netip.AddrPort `json:"peer"`
		HeaderRemaining uint64         `json:"hdr_remaining"`
		DataRemaining   uint64         `json:"data_remaining"`
		LastSentNext    uint32         `json:"last_sent_nxt"`
		LastExpectedUna uint32         `json:"last_expected_una"`
		LastSeenUna     uint32         `json:"last_seen_una"`
		TOS             uint8          `json:"tos"`
	}
	ibConnectionRow struct {
		Source      netip.Addr `json:"source"`
		Dest        netip.Addr `json:"dest"`
		SourceGID   string     `json:"source_gid"`
		DestGID     string     `json:"dest_gid"`
		MaxSendWR   uint32     `json:"max_send_wr"`
		MaxRecvWR   uint32     `json:"max_recv_wr"`
		MaxSendSGE  uint32     `json:"max_send_sge"`
		RDMAMRMax   uint32     `json:"rdma_mr_max"`
		RDMAMRSize  uint32     `json:"rdma_mr_size"`
		TOS         uint8      `json:"tos"`
		SL          uint8      `json:"sl"`
		CacheAllocs uint32     `json:"cache_allocs"`
	}
	rawRow struct {
		Hex string `json:"hex"`
	}
)

func connFlags(f uint8) string {
	b := []byte("---")
	if f&rdsabi.InfoConnFlagSending != 0 {
		b[0] = 's'
	}
	if f&rdsabi.InfoConnFlagConnecting != 0 {
		b[1] = 'c'
	}
	if f&rdsabi.InfoConnFlagConnected != 0 {
		b[2] = 'C'
	}
	return string(b)
}

func msgFlags(f uint8) string {
	var s []string
	if f&rdsabi.InfoMsgFlagAck != 0 {
		s = append(s, "ack")
	}
	if f&rdsabi.InfoMsgFlagFastAck != 0 {
		s = append(s, "fastack")
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func gid(g [16]byte) string { return netip.AddrFrom16(g).String() }

// readTable reads and decodes one kernel table into rows for output; the
// RDS6 tables show IPv4 peers as the kernel does, IPv4-mapped.
func readTable(rc syscall.RawConn, t rdsinfo.Table) (any, error) {
	data, each, err := rdsinfo.Read(rc, t, nil)
	if err != nil {
		if h := rdsinfo.Hint(t, err); h != "" {
			err = fmt.Errorf("%w (%s)", err, h)
		}
		return nil, err
	}
	v6 := t.V6()
	switch t {
	case rdsinfo.Counters, rdsinfo.ConnectionStats:
		rs, err := rdsinfo.ParseCounters(data, each)
		return rowsOf(rs, err, func(x rdsinfo.Counter) counterRow {
			return counterRow{x.Name, x.Value}
		})
	case rdsinfo.Connections, rdsinfo.Connections6:
		rs, err := rdsinfo.ParseConnections(data, each, v6)
		return rowsOf(rs, err, func(x rdsinfo.Connection) connectionRow {
			return connectionRow{x.Local, x.Remote, x.TOS, x.NextTxSeq, x.NextRxSeq, connFlags(x.Flags), x.Transport}
		})
	case rdsinfo.SendMessages, rdsinfo.RetransMessages, rdsinfo.RecvMessages,
		rdsinfo.SendMessages6, rdsinfo.RetransMessages6, rdsinfo.RecvMessages6:
		rs, err := rdsinfo.ParseMessages(data, each, v6)
		return rowsOf(rs, err, func(x rdsinfo.Message) messageRow {
			return messageRow{x.Local, x.Remote, x.Seq, x.Len, msgFlags(x.Flags), x.TOS}
		})
	case rdsinfo.Sockets, rdsinfo.Sockets6:
		rs, err := rdsinfo.ParseSockets(data, each, v6)
		return rowsOf(rs, err, func(x rdsinfo.Socket) socketRow {
			return socketRow{x.Bound, x.Connected, x.SendBuffer, x.ReceiveBuffer, x.Inode}
		})
	case rdsinfo.TCPSockets, rdsinfo.TCPSockets6:
		rs, err := rdsinfo.ParseTCPSockets(data, each, v6)
		return rowsOf(rs, err, func(x rdsinfo.TCPSocket) tcpSocketRow {
			return tcpSocketRow{x.Local, x.Peer, x.HeaderRemaining, x.DataRemaining,
				x.LastSentNext, x.LastExpectedUna, x.LastSeenUna, x.TOS}
		})
	case rdsinfo.IBConnections, rdsinfo.IBConnections6:
		rs, err := rdsinfo.ParseIBConnections(data, each, v6)
		return rowsOf(rs, err, func(x rdsinfo.IBConnection) ibConnectionRow {
			return ibConnectionRow{x.Source, x.Dest, gid(x.SourceGID), gid(x.DestGID),
				x.MaxSendWR, x.MaxRecvWR, x.MaxSendSGE, x.RDMAMRMax, x.RDMAMRSize, x.TOS, x.SL, x.CacheAllocs}
		})
	}
	// A table without a decoder: show its rows as hex.
	rows := []rawRow{}
	for each > 0 && len(data) >= each {
		rows = append(rows, rawRow{hex.EncodeToString(data[:each])})
		data = data[each:]
	}
	return rows, nil
}

// rowsOf converts decoded rows into output rows (never nil, so that JSON
// shows an empty table as []).
func rowsOf[R, O any](rs []R, err error, f func(R) O) (any, error) {
	if err != nil {
		return nil, err
	}
	out := make([]O, 0, len(rs))
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out, nil
}

// printTable writes one table as aligned columns under a title line.
func printTable(w io.Writer, name string, rows any) {
	fmt.Fprintf(w, "%s:\n", name)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	line := func(cols ...any) {
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	n := 0
	switch rs := rows.(type) {
	case []counterRow:
		line("  NAME", "VALUE")
		for _, r := range rs {
			line("  "+r.Name, r.Value)
		}
		n = len(rs)
	case []connectionRow:
		line("  LOCAL", "REMOTE", "TOS", "NEXT_TX", "NEXT_RX", "FLAGS", "TRANSPORT")
		for _, r := range rs {
			line("  "+r.Local.String(), r.Remote, r.TOS, r.NextTxSeq, r.NextRxSeq, r.Flags, r.Transport)
		}
		n = len(rs)
	case []messageRow:
		line("  LOCAL", "REMOTE", "SEQ", "BYTES", "FLAGS", "TOS")
		for _, r := range rs {
			line("  "+r.Local.String(), r.Remote, r.Seq, r.Len, r.Flags, r.TOS)
		}
		n = len(rs)
	case []socketRow:
		line("  BOUND", "CONNECTED", "SNDBUF", "RCVBUF", "INODE")
		for _, r := range rs {
			conn := "-"
			if r.Connected.Addr().IsValid() && !r.Connected.Addr().IsUnspecified() {
				conn = r.Connected.String()
			}
			line("  "+r.Bound.String(), conn, r.SendBuffer, r.ReceiveBuffer, r.Inode)
		}
		n = len(rs)
	case []tcpSocketRow:
		line("  LOCAL", "PEER", "HDR_REM", "DATA_REM", "SENT_NXT", "EXP_UNA", "SEEN_UNA", "TOS")
		for _, r := range rs {
			line("  "+r.Local.String(), r.Peer, r.HeaderRemaining, r.DataRemaining, r.LastSentNext, r.LastExpectedUna, r.LastSeenUna, r.TOS)
		}
		n = len(rs)
	case []ibConnectionRow:
		line("  SOURCE", "DEST", "SOURCE_GID", "DEST_GID", "SEND_WR", "RECV_WR", "SEND_SGE", "MR_MAX", "MR_SIZE", "TOS", "SL", "CACHE_ALLOCS")
		for _, r := range rs {
			line("  "+r.Source.String(), r.Dest, r.SourceGID, r.DestGID, r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.RDMAMRMax, r.RDMAMRSize, r.TOS, r.SL, r.CacheAllocs)
		}
		n = len(rs)
	case []rawRow:
		line("  ROW (hex)")
		for _, r := range rs {
			line("  " + r.Hex)
		}
		n = len(rs)
	}
	if n == 0 {
		tw.Flush()
		fmt.Fprintln(w, "  (empty)")
	}
}
