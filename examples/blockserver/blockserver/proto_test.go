//go:build linux

package blockserver

import (
	"bytes"
	"errors"
	"testing"
)

func TestMsgRoundTrip(t *testing.T) {
	m := msg{Op: opWrite, Status: errChecksum, Aux: 7, ID: 0xdeadbeef, Block: 1 << 40, Buf: 3, CRC: 0x12345678, Cookie: 0x1122334455667788}
	m.Sum[0], m.Sum[31] = 1, 2
	b := m.encode(make([]byte, headerLen))
	var got msg
	if err := got.decode(b); err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if err := got.decode(b[:10]); !errors.Is(err, errShort) {
		t.Fatalf("short: %v", err)
	}
	if !bytes.Equal(Content(5, 100), Content(5, 100)) || bytes.Equal(Content(5, 64), Content(6, 64)) {
		t.Fatal("Content is not a function of its seed")
	}
	for s := uint8(0); s < 7; s++ {
		if statusText(s) == "" {
			t.Fatal("statusText")
		}
	}
}
