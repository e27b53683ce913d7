//go:build linux

package blockserver

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

func requestBytes(m msg) []byte { return m.encode(make([]byte, headerLen)) }

// FuzzParseRequest feeds arbitrary messages to the server's request parser
// and checks its contract: a message is served only when it is exactly 64
// bytes of a request kind with its block in range, and then it re-encodes
// to the same bytes; anything else gets a known error status that names
// the request ID whenever the message holds one; the error reply built
// from it decodes back unchanged and is never taken for a request.
func FuzzParseRequest(f *testing.F) {
	for _, m := range []msg{
		{Op: opPing, ID: 1},
		{Op: opRead, ID: 2, Block: 3, Buf: 1, Cookie: 0x1234},
		{Op: opWrite, ID: 3, Block: 1 << 40, CRC: 7},
		{Op: opSum, ID: 4},
		{Op: opBye},
		{Op: opAnnounce, Buf: 5},
		{Op: opError, ID: 9, Status: errBadBlock},
		{Op: 200, ID: 10},
	} {
		f.Add(requestBytes(m), false, uint64(128))
	}
	f.Add([]byte{}, false, uint64(1))
	f.Add([]byte{opRead, 0, 0, 0, 1, 2, 3, 4, 5}, false, uint64(1))
	f.Add(bytes.Repeat([]byte{opPing}, 100), false, uint64(1))
	f.Add(bytes.Repeat([]byte{opRead}, 4096), true, uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, truncated bool, nblocks uint64) {
		m, status, aux := parseRequest(b, truncated, nblocks)
		if status == 0 {
			if len(b) != headerLen || truncated {
				t.Fatalf("served a message of %d bytes (truncated %v)", len(b), truncated)
			}
			switch m.Op {
			case opRead, opWrite:
				if m.Block >= nblocks {
					t.Fatalf("served block %d of %d", m.Block, nblocks)
				}
			case opPing, opSum, opBye, opAnnounce:
			default:
				t.Fatalf("served opcode %d", m.Op)
			}
			if !bytes.Equal(requestBytes(m), b) {
				t.Fatalf("%x re-encodes as %x", b, requestBytes(m))
			}
			return
		}
		if strings.HasPrefix(statusText(status), "status ") {
			t.Fatalf("unknown error status %d", status)
		}
		if (status == errMalformed || status == errUnknownOp) && auxText(status, aux) == "" {
			t.Fatalf("status %d with unexplained aux %d", status, aux)
		}
		if len(b) >= 8 && m.ID != binary.LittleEndian.Uint32(b[4:]) {
			t.Fatalf("error for request %d names ID %d", binary.LittleEndian.Uint32(b[4:]), m.ID)
		}
		if len(b) < 8 && m.ID != 0 {
			t.Fatalf("ID %d invented from %d bytes", m.ID, len(b))
		}
		reply := msg{Op: opError, ID: m.ID, Block: m.Block, Buf: m.Buf, Status: status, Aux: aux}
		rb := requestBytes(reply)
		var back msg
		if err := back.decode(rb); err != nil || back != reply {
			t.Fatalf("reply %+v decodes as %+v, %v", reply, back, err)
		}
		if _, st, _ := parseRequest(rb, false, nblocks); st != errUnknownOp || !isReplyKind(rb[0]) {
			t.Fatalf("an error reply parses as a request (status %d)", st)
		}
		// The client's decoder accepts exactly the 64-byte messages.
		var c msg
		if err := c.decode(b); (err == nil) != (len(b) == headerLen) {
			t.Fatalf("client decode of %d bytes: %v", len(b), err)
		}
	})
}

// FuzzCookieTable runs a sequence of announcements and checks against a
// model: a request is valid only with the cookie last announced by the
// same client for the same buffer, and the table never holds more than
// MaxClients clients or buffer indexes from MaxBuffers up.
func FuzzCookieTable(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(bytes.Repeat([]byte{0xff, 0x03, 0x04, 0x00, 9, 9, 9, 9, 9, 9, 9, 9}, 20))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tab cookieTable
		type key struct {
			from netip.AddrPort
			buf  uint32
		}
		model := map[key]uint64{}
		clients := map[netip.AddrPort]bool{}
		for len(ops) >= 12 {
			// 1 byte client (a few hundred distinct ones), 1 byte kind,
			// 2 bytes buffer, 8 bytes cookie.
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, ops[0] >> 4, 1}), uint16(ops[0]&0xf)*37+uint16(ops[1]>>1))
			announce := ops[1]&1 == 0
			buf := uint32(binary.LittleEndian.Uint16(ops[2:]))
			ck := binary.LittleEndian.Uint64(ops[4:])
			ops = ops[12:]
			k := key{from, buf}
			if announce {
				lim := tab.announce(from, buf, ck)
				switch {
				case buf >= MaxBuffers:
					if lim != limBuffers {
						t.Fatalf("buffer %d accepted (%d)", buf, lim)
					}
				case !clients[from] && len(clients) >= MaxClients:
					if lim != limClients {
						t.Fatalf("client %d accepted beyond the limit", len(clients)+1)
					}
				default:
					if lim != 0 {
						t.Fatalf("announcement refused: %d", lim)
					}
					clients[from] = true
					model[k] = ck
				}
			}
			want, ok := model[k]
			if got := tab.valid(from, buf, ck); got != (ok && want == ck) {
				t.Fatalf("valid(%v, %d, %x) = %v, model %x %v", from, buf, ck, got, want, ok)
			}
			if ok && want != ck && tab.valid(from, buf, want^1) {
				t.Fatal("a cookie never announced is valid")
			}
			if len(tab.clients) > MaxClients {
				t.Fatalf("%d clients remembered", len(tab.clients))
			}
		}
	})
}
