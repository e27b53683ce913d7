package rdssock

import "net/netip"

// Message is one datagram of a batch for ReadBatch and WriteBatch.
type Message struct {
	// Buffer holds the data to send, or receives the data.
	Buffer []byte
	// OOB holds control messages to send, or receives them.
	OOB []byte
	// Addr is the destination of a send (zero: the Connect address) and the
	// sender of a received message (zero for control-only notices).
	Addr netip.AddrPort
	// N and NN are set by ReadBatch: the bytes of data and of control data
	// received. WriteBatch sets N to the bytes sent.
	N, NN int
	// Flags is set by ReadBatch to the message's recvmsg flags; MSG_TRUNC
	// or MSG_CTRUNC there means the message did not fit.
	Flags int
}
