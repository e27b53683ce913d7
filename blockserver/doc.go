// Package blockserver is the classic RDS RDMA example: a server exporting
// a file as numbered blocks, and a client reading and writing them with
// zero copies.
//
// Read: the client sends the cookie of one of its pre-registered buffers
// and a block number; the server reads the block into its own buffer and
// RDMA-writes it into the client's, with immediate data saying "block N is
// in your buffer" (and its CRC-32), which the kernel delivers only after
// the data. Write: the server RDMA-reads the block from the client's
// buffer; the immediate data of that READ (sent with FENCE, so after the
// READ completed) tells the client its buffer is free again; after the
// block is written and the file fsynced, a separate message confirms it.
// The server recycles its own buffers when their RDMA completion status
// arrives (package barrier); the client's buffers cycle through an
// rdmaops.Pool, so no registration happens after Dial.
//
// Package main in examples/blockserver runs either side.
//
// # Wire format
//
// Every message is exactly 64 bytes, little-endian:
//
//	offset  size  field
//	     0     1  kind (opcode)
//	     1     1  status (error replies)
//	     2     2  aux (error detail)
//	     4     4  request ID, echoed in replies
//	     8     8  block number
//	    16     4  client buffer index
//	    20     4  CRC-32 (IEEE) of the block
//	    24     8  RDMA cookie of the client buffer
//	    32    32  SHA-256 (checksum exchange)
//
// Kinds a client sends: 1 ping, 3 read, 5 write, 9 checksum, 11 goodbye,
// 12 announce. Kinds a server sends: 2 pong, 4 read done (immediate data
// of the WRITE), 6 write fetched (immediate data of the READ), 7 write
// done, 8 error, 10 checksum reply.
//
// Announce carries an RDS_CMSG_RDMA_DEST control message: "my buffer
// (index) is registered under this cookie now". The client's pool sends
// one for each registration, so a buffer registered again (after a failed
// call) is announced again and its old cookie becomes stale. The server
// keeps the last cookie announced per client address and buffer index, for
// at most MaxClients clients and MaxBuffers buffers each, and serves a
// read or write only if its cookie is the one announced for that client's
// buffer: a bogus, foreign or stale cookie never reaches the RDMA
// hardware, where a bad key would tear the connection down.
//
// # Hostile input
//
// The server checks every message it receives before acting on it and
// answers each one it will not serve with an error reply (kind 8) that
// echoes the request ID when the message holds one (at least 8 bytes;
// otherwise ID 0), the block and buffer fields when it holds them, a
// status and an aux detail, and counts it in ServerStats by reason:
//
//	status  meaning                                aux            counter
//	     1  block number out of range              0              BadBlocks
//	     5  malformed: under 64 bytes              1              Short
//	     5  malformed: over 64 bytes (truncated    2              Long
//	        or not)
//	     5  malformed: empty message               3              Empty
//	     5  announce without RDMA_DEST             4              NoCookie
//	     6  not a request kind                     the opcode     UnknownOps
//	     7  cookie not announced for this buffer   0              BadCookies
//	        by this client (unknown, bogus, stale)
//	     8  over a limit: MaxClients, MaxBuffers   1, 2           OverLimit
//
// Checks run in that order: length, kind, block range, cookie. The one
// exception to answering: a message of a kind the server itself sends
// (pong, read done, write fetched, write done, error, checksum reply) is
// dropped without an answer and counted in UnknownOps and Dropped, so two
// servers can never trade error replies forever. Zero-byte receives that
// carry only control data (RDMA completion notices, congestion updates)
// are not messages and are not counted.
//
// Failures while serving a valid request are answered the same way:
// status 2 (the RDMA failed; aux is its barrier.Status), 3 (a written
// block's CRC did not match), 4 (file I/O failed). Every error reply is
// counted in ServerStats.Errors. A refused message changes no state, and
// the server goes on serving.
//
// The protocol trusts its clients in one respect: goodbye (kind 11) ends
// Serve, from whichever client sends it.
package blockserver
