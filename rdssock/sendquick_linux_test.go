//go:build linux

package rdssock

import (
	"bytes"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/go-rds/rds/internal/sendlink"
	"golang.org/x/sys/unix"
)

// TestSendQuick: rdmaops' quick send (sendlink.Try) sends the message
// with its control data, to the destination of the Conn's last send or
// the connected peer, and reports false, having sent nothing, where the
// full way must go: before any send, to another destination, with a bad
// control buffer, while another send holds the send state, and once the
// Conn is closed.
func TestSendQuick(t *testing.T) {
	a, b := pair(t)
	try := func(p []byte, oob []byte, to netip.AddrPort) bool {
		return sendlink.Try(unsafe.Pointer(a), p, oob, to)
	}
	if try([]byte("early"), nil, noAddr) {
		t.Fatal("the quick send went before the Conn had a send state")
	}
	if _, err := a.WriteMsg([]byte("first"), nil, noAddr); err != nil {
		t.Fatal(err)
	}
	creds := credsCmsg()
	if !try([]byte("quick"), creds, noAddr) {
		t.Fatal("the quick send to the connected peer did not go")
	}
	if !try(nil, creds, noAddr) {
		t.Fatal("the quick send of 0 bytes with control data did not go")
	}
	// A connected AF_UNIX SOCK_SEQPACKET socket ignores a destination, so
	// a message that went to one arrives all the same.
	elsewhere := netip.MustParseAddrPort("192.0.2.1:4000")
	if try([]byte("elsewhere"), nil, elsewhere) {
		t.Fatal("the quick send went to a destination whose address the send state does not hold")
	}
	if err := a.op[1].setDest(elsewhere); err != nil { // as a send there leaves it
		t.Fatal(err)
	}
	if try([]byte("elsewhere"), nil, elsewhere) {
		t.Fatal("the quick send went to a destination that needs a warm-up")
	}
	a.warm.off.Store(true)
	if try([]byte("other"), nil, netip.MustParseAddrPort("192.0.2.2:4000")) {
		t.Fatal("the quick send went to a destination whose address the send state does not hold")
	}
	if !try([]byte("elsewhere"), nil, elsewhere) {
		t.Fatal("the quick send to the destination of the last send did not go")
	}
	bad := append(bytes.Clone(creds), 0) // a length the kernel refuses
	bad[0] = 0xff
	if try([]byte("bad"), bad, noAddr) {
		t.Fatal("the quick send with a malformed control buffer reported success")
	}
	a.opBusy[1].Store(true)
	busy := try([]byte("busy"), nil, noAddr)
	a.opBusy[1].Store(false)
	if busy {
		t.Fatal("the quick send went while another send held the send state")
	}
	// The kernel took the control data (it refused the malformed one).
	buf := make([]byte, 64)
	for _, want := range []string{"first", "quick", "", "elsewhere"} {
		n, _, _, _, err := b.ReadMsg(buf, nil)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("ReadMsg = %q, %v; want %q", buf[:n], err, want)
		}
	}
	if n, _, _, _, err := b.ReadMsgContext(t.Context(), buf, nil, unix.MSG_DONTWAIT); err == nil {
		t.Fatalf("a refused quick send left a message: %q", buf[:n])
	}
	a.Close()
	if try([]byte("closed"), nil, noAddr) {
		t.Fatal("the quick send went after Close")
	}
}
