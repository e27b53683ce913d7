//go:build linux

package blockserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Message kinds.
const (
	opPing         = 1  // client → server: are you there?
	opPong         = 2  // server → client
	opRead         = 3  // client → server: RDMA-write block Block into my buffer Cookie
	opReadDone     = 4  // server → client, immediate data of the WRITE: block is in your buffer; CRC of it
	opWrite        = 5  // client → server: RDMA-read block Block from my buffer Cookie; CRC of it
	opWriteFetched = 6  // server → client, immediate data of the READ: your buffer is free again
	opWriteDone    = 7  // server → client: the block is on stable storage (after fsync)
	opError        = 8  // server → client: request ID failed; Status says why
	opSum          = 9  // client → server: SHA-256 of the whole file, please
	opSumReply     = 10 // server → client
	opBye          = 11 // client → server: stop serving; Sum holds the client's SHA-256 of the file
	opAnnounce     = 12 // client → server with RDMA_DEST: buffer Buf is registered under that cookie now
	opRelease      = 13 // server → client, after an errHeld reply: the RDMA of request ID is over, the buffer is free
)

// Error statuses in opError.
const (
	errBadBlock  = 1 // block number out of range
	errTransfer  = 2 // the RDMA failed (its barrier status is in Aux)
	errChecksum  = 3 // the data read from the client does not match its CRC
	errIO        = 4 // the file operation failed
	errMalformed = 5 // not a well-formed message; Aux says how (mal*)
	errUnknownOp = 6 // not a request the server serves; Aux is the opcode
	errBadCookie = 7 // the cookie is not the one this client announced for that buffer: unknown, bogus or stale
	errLimit     = 8 // over a limit: announcements, backlogs, checksum queue; Aux is the limit hit (lim*)
	errHeld      = 9 // the RDMA timed out and the server's kernel may still move data: the buffer stays held until opRelease
)

// Reasons in the Aux of errMalformed.
const (
	malShort    = 1 // fewer than 64 bytes
	malLong     = 2 // more than 64 bytes
	malEmpty    = 3 // no bytes at all
	malNoCookie = 4 // an announcement without an RDMA_DEST cookie
)

// Limits in the Aux of errLimit.
const (
	limClients = 1 // more than MaxClients clients announced buffers
	limBuffers = 2 // a buffer index of MaxBuffers or more
	limClient  = 3 // this client's backlog of transfers is full
	limServer  = 4 // the server's backlog of transfers is full
	limSums    = 5 // the checksum queue (or this client's share of it) is full
)

// MaxClients is the most client addresses whose buffer announcements a
// Server keeps, and MaxBuffers the most buffers per client (indexes 0 to
// MaxBuffers-1): the bounds on what hostile announcements can make it
// remember.
const (
	MaxClients = 256
	MaxBuffers = 1024
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
	case errUnknownOp:
		return "unknown operation"
	case errBadCookie:
		return "cookie not announced for this buffer (unknown, bogus or stale)"
	case errLimit:
		return "over the server's limits"
	case errHeld:
		return "RDMA transfer timed out; the buffer stays held until the server releases it"
	}
	return fmt.Sprintf("status %d", s)
}

// auxText explains the Aux of an error status, "" if it has no meaning.
func auxText(status uint8, aux uint16) string {
	switch status {
	case errMalformed:
		switch aux {
		case malShort:
			return fmt.Sprintf("shorter than %d bytes", headerLen)
		case malLong:
			return fmt.Sprintf("longer than %d bytes", headerLen)
		case malEmpty:
			return "empty"
		case malNoCookie:
			return "announcement without a cookie"
		}
	case errUnknownOp:
		return fmt.Sprintf("opcode %d", aux)
	case errLimit:
		switch aux {
		case limClients:
			return fmt.Sprintf("more than %d clients", MaxClients)
		case limBuffers:
			return fmt.Sprintf("buffer index %d or more", MaxBuffers)
		case limClient:
			return "this client's backlog is full"
		case limServer:
			return "the server's backlog is full"
		case limSums:
			return "the checksum queue is full"
		}
	case errTransfer, errHeld:
		return fmt.Sprintf("barrier status %d", aux)
	}
	return ""
}

// parseRequest decodes and checks one message received by the server: n
// bytes in b, truncated if the receive buffer could not hold it all. It
// returns the message and status 0 when it is a request to serve, and
// otherwise the error status and aux to answer with; the returned
// message's ID is the request ID whenever b holds one (at least 8 bytes),
// so that the error reply names the request. Cookies are checked
// separately (cookieTable), since they depend on earlier announcements.
func parseRequest(b []byte, truncated bool, nblocks uint64) (m msg, status uint8, aux uint16) {
	switch {
	case len(b) == 0 && !truncated:
		return m, errMalformed, malEmpty
	case len(b) < 8:
		return m, errMalformed, malShort
	}
	if len(b) != headerLen || truncated {
		m.Op = b[0]
		m.ID = binary.LittleEndian.Uint32(b[4:])
		if len(b) < headerLen {
			return m, errMalformed, malShort
		}
		return m, errMalformed, malLong
	}
	m.decode(b)
	switch m.Op {
	case opPing, opSum, opBye, opAnnounce:
	case opRead, opWrite:
		if m.Block >= nblocks {
			return m, errBadBlock, 0
		}
	default:
		return m, errUnknownOp, uint16(m.Op)
	}
	return m, 0, 0
}

// isReplyKind reports whether op is a kind the server sends. Such a
// message sent to a server is refused without an answer: answering it
// with an error could start an endless exchange of errors between two
// servers.
func isReplyKind(op uint8) bool {
	switch op {
	case opPong, opReadDone, opWriteFetched, opWriteDone, opError, opSumReply, opRelease:
		return true
	}
	return false
}

// cookieTable remembers, per client address, the cookie each buffer was
// last announced under, within MaxClients and MaxBuffers.
type cookieTable struct {
	clients map[netip.AddrPort]map[uint32]uint64
}

// announce records that from registered buffer buf under ck; it returns
// an errLimit aux, or 0.
func (t *cookieTable) announce(from netip.AddrPort, buf uint32, ck uint64) uint16 {
	if buf >= MaxBuffers {
		return limBuffers
	}
	if t.clients == nil {
		t.clients = make(map[netip.AddrPort]map[uint32]uint64)
	}
	bufs := t.clients[from]
	if bufs == nil {
		if len(t.clients) >= MaxClients {
			return limClients
		}
		bufs = make(map[uint32]uint64)
		t.clients[from] = bufs
	}
	bufs[buf] = ck
	return 0
}

// valid reports whether ck is the cookie from last announced for buf.
func (t *cookieTable) valid(from netip.AddrPort, buf uint32, ck uint64) bool {
	cur, ok := t.clients[from][buf]
	return ok && cur == ck
}
