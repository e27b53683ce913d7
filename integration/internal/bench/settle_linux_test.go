//go:build linux

package bench

import "testing"

func TestParseTCPBacklog(t *testing.T) {
	// Rows as the kernel prints them: a listener on 16385, an RDS/TCP
	// connection with 0x1a0 bytes unacknowledged and 0x20 unread, one
	// with the RDS port on the remote side, and an ssh connection whose
	// queues must not count.
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:4001 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0200000A:4001 0100000A:B2C4 01 000001A0:00000020 01:00000014 00000000     0        0 0 2 0000000000000000 20 4 30 10 -1
   2: 0100000A:B2C4 0200000A:4001 01 00000005:00000000 00:00000000 00000000     0        0 0 2 0000000000000000 20 4 30 10 -1
   3: 0100000A:0016 0200000A:D431 01 00001000:00000300 00:00000000 00000000     0        0 0 2 0000000000000000 20 4 30 10 -1
`
	got, err := parseTCPBacklog([]byte(table), rdsTCPPort)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(0x1a0 + 0x20 + 5); got != want {
		t.Errorf("backlog = %d, want %d", got, want)
	}
	if _, err := parseTCPBacklog([]byte("header\n 0: 0100000A:4001 0200000A:0001 01 zz:0\n"), rdsTCPPort); err == nil {
		t.Error("a malformed queue field parsed without error")
	}
}
