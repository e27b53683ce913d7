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
// The server recycles its own buffers when package barrier releases their
// RDMA operation (its memory is free again); the client's buffers cycle
// through an rdmaops.Pool, so no registration happens after Dial.
//
// It is an example application, not part of the library's API: the
// command in the parent directory (examples/blockserver) runs either side,
// and the integration tests use the package directly.
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
// done, 8 error, 10 checksum reply, 13 release.
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
//	     8  busy: the client's backlog, the        3, 4, 5        Busy
//	        server's backlog, the checksum queue
//
// Checks run in that order: length, kind, block range, cookie, limits. The one
// exception to answering: a message of a kind the server itself sends
// (pong, read done, write fetched, write done, error, checksum reply) is
// dropped without an answer and counted in UnknownOps and Dropped, so two
// servers can never trade error replies forever. Zero-byte receives that
// carry only control data (RDMA completion notices, congestion updates)
// are not messages and are not counted.
//
// Failures while serving a valid request are answered the same way:
// status 2 (the RDMA failed; aux is its barrier.Status), 3 (a written
// block's CRC did not match), 4 (file I/O failed), 9 (the RDMA timed out
// and the buffer stays held, see below). Every error reply is counted in
// ServerStats.Errors. A refused message changes no state, and the server
// goes on serving.
//
// # Bounds
//
// The server holds at most ServerConfig.Slots transfers in flight. Read
// and write requests wait for a slot in one FIFO backlog of at most
// ServerConfig.Backlog requests, at most ServerConfig.ClientBacklog of
// them from one client address; checksum requests (a SHA-256 of the whole
// file each) wait in a queue of four, one per client, and are computed by
// a goroutine of their own. A request beyond a bound is refused at once
// with status 8 (aux 3, 4 or 5). The receive loop never waits to send:
// its replies (pongs, refusals) use MSG_DONTWAIT, and a reply the kernel
// refuses, for example to a congested client, is counted in Unsent. A
// client gets at most 64 refusals (of any kind) a second; a message
// refused beyond that gets no reply and is counted in Unanswered, so that
// a client flooding the server cannot fill its send buffer with refusals,
// which would leave no room for the transfers of other clients. (A Client
// call whose request goes unanswered waits for its context, and its
// buffer is then quarantined, since the client cannot know that the
// server never touched it: retry a busy refusal after a pause.) One
// dispatcher goroutine starts transfers and answers their completions in
// a loop; a transfer that fails to send only queues an event for it, so a
// backlog of failing jobs never recurses. Among the first 64 queued
// requests, the oldest of a client with the fewest transfers in flight
// starts first.
//
// These bounds keep the server's memory and goroutines fixed, but they
// act on what the server has received. A client that sends faster than
// the server can receive fills the server socket's receive queue, and RDS
// then marks the server's port congested for every sender: other clients'
// requests fail with rdssock.ErrCongested (use a client socket with
// rdssock.Config.WaitCongested to wait instead), and RDS's congestion
// updates, not the server, decide whose message gets in next. Measured in
// package integration (TestBlockServerBacklogFlood under TCG, one run on
// each of Linux 6.1, 6.12 and 7.2, with the refusal budget): during a
// flood of 1,000 requests/s another client's median read took 5-10 ms
// and it kept reading at 92-168 reads/s; during an unpaced flood of
// 7,900-29,600 requests/s, 40 reads/s on 6.1 (median 24 ms), 9.4 on 6.12
// (96 ms) and 1.4 on 7.2 (1.0 s), with no transfer failing to send.
// Before the budget, the server sent a refusal for each flood request,
// and on 7.2 the other client's transfers failed to send about as often
// as they went through.
//
// # Timeouts and held buffers
//
// Memory the kernel may still read or write stays out of use on both
// sides until the kernel is known to be done with it. Every transfer has
// a deadline (ServerConfig.Timeout). When it passes, the server answers
// at once with status 9, "held": the transfer failed, but the server's
// kernel may still carry it out, moving data into or out of the client's
// buffer and the server's slot. The slot stays held, never reused, until
// the kernel's late status for the transfer arrives (counted in
// LateFreed) or Close closes the socket; the server then sends a release
// message (kind 13) with the request ID, block and buffer. A client that
// gets status 9 revokes the buffer's key and keeps the buffer
// quarantined until that release, then registers it anew (announcing the
// new cookie). Status 2 means the transfer is over: the client may reuse
// the buffer at once, with a new key. A client that gives up waiting
// (its context ends) quarantines the buffer the same way until the
// server's next message for that request: its answer, which proves the
// transfer over, or status 9, after which it waits for the release.
//
// RDS delivers a server's messages in order after its earlier RDMA on
// the same connection, so a client usually gets the late transfer's
// immediate data (read done, write fetched) before status 9: measured in
// package integration/twovmhostile. The release message does not rely on
// that.
//
// # Authentication of replies
//
// A client accepts a message only from its server's address and only
// with the ID of a request it has outstanding or held; request IDs are
// random (ChaCha8 seeded from crypto/rand), so another host cannot forge
// a read completion, a write confirmation or a release without guessing
// one. Ignored messages are counted in ClientStats (Foreign, Stray). This
// does not stop a host that can send from the server's own address.
//
// The protocol trusts its clients in one respect: goodbye (kind 11) ends
// Serve, from whichever client sends it.
package blockserver
