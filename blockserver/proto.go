//go:build linux && (amd64 || arm64 || ppc64le || riscv64 || loong64 || mips64le)

package blockserver

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Message kinds.
const (
	opPing         = 1 // client → server: are you there?
	opPong         = 2 // server → client
	opRead         = 3 // client → server: RDMA-write block Block into my buffer Cookie
	opReadDone     = 4 // server → client, immediate data of the WRITE: block is in your buffer; CRC of it
	opWrite        = 5 // client → server: RDMA-read block Block from my buffer Cookie; CRC of it
	opWriteFetched = 6 // server → client, immediate data of the READ: your buffer is free again
	opWriteDone    = 7 // server → client: the block is on stable storage (after fsync)
	opError        = 8 // server → client: request ID failed; Status says why
	opSum          = 9 // client → server: SHA-256 of the whole file, please
	opSumReply     = 10
	opBye          = 11 // client → server: stop serving; Sum holds the client's SHA-256 of the file
)

// Error statuses in opError.
const (
	errBadBlock  = 1 // block number out of range
	errTransfer  = 2 // the RDMA failed (its barrier status is in Aux)
	errChecksum  = 3 // the data read from the client does not match its CRC
	errIO        = 4 // the file operation failed
	errMalformed = 5
)

// headerLen is the size of every message; opSumReply and opBye carry a
// SHA-256 after the fixed fields.
const headerLen = 64

// msg is the wire message: little-endian fixed fields.
type msg struct {
	Op     uint8
	Status uint8
	Aux    uint16
	ID     uint32
	Block  uint64
	Buf    uint32 // client buffer index
	CRC    uint32 // CRC-32 (IEEE) of the block's data
	Cookie uint64
	Sum    [32]byte
}

func (m *msg) encode(b []byte) []byte {
	b = b[:headerLen]
	clear(b)
	b[0], b[1] = m.Op, m.Status
	binary.LittleEndian.PutUint16(b[2:], m.Aux)
	binary.LittleEndian.PutUint32(b[4:], m.ID)
	binary.LittleEndian.PutUint64(b[8:], m.Block)
	binary.LittleEndian.PutUint32(b[16:], m.Buf)
	binary.LittleEndian.PutUint32(b[20:], m.CRC)
	binary.LittleEndian.PutUint64(b[24:], m.Cookie)
	copy(b[32:], m.Sum[:])
	return b
}

var errShort = errors.New("blockserver: short message")

func (m *msg) decode(b []byte) error {
	if len(b) != headerLen {
		return fmt.Errorf("%w: %d bytes, want %d", errShort, len(b), headerLen)
	}
	m.Op, m.Status = b[0], b[1]
	m.Aux = binary.LittleEndian.Uint16(b[2:])
	m.ID = binary.LittleEndian.Uint32(b[4:])
	m.Block = binary.LittleEndian.Uint64(b[8:])
	m.Buf = binary.LittleEndian.Uint32(b[16:])
	m.CRC = binary.LittleEndian.Uint32(b[20:])
	m.Cookie = binary.LittleEndian.Uint64(b[24:])
	copy(m.Sum[:], b[32:])
	return nil
}

// ErrServer is returned by client calls the server answered with an error.
var ErrServer = errors.New("blockserver: server reported an error")

func statusText(s uint8) string {
	switch s {
	case errBadBlock:
		return "block out of range"
	case errTransfer:
		return "RDMA transfer failed"
	case errChecksum:
		return "checksum mismatch"
	case errIO:
		return "file I/O failed"
	case errMalformed:
		return "malformed request"
	}
	return fmt.Sprintf("status %d", s)
}
