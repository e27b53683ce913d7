// Package rdmaops performs RDS RDMA: registering local memory for a peer,
// RDMA READ and WRITE with immediate data, atomics, and a pool of
// pre-registered buffers. Completion tracking is package barrier's.
//
// It builds on Linux on the 64-bit architectures package cmsg supports; the
// socket must use the InfiniBand transport (rds_rdma, including RoCE and
// Soft-RoCE): on TCP and loopback every RDMA control message fails with
// EOPNOTSUPP.
//
// # The RDS RDMA model
//
// A client registers a buffer and obtains a cookie naming it; it sends the
// cookie to a server in an ordinary RDS message. The server issues an RDMA
// READ or WRITE against the cookie through its own socket, usually with
// immediate data: a message the kernel delivers to the client only once
// the RDMA completed, so "the data is in your buffer" arrives after the
// data. The server learns that its own local buffers are free again from
// the RDS_CMSG_RDMA_STATUS notice requested with RDS_RDMA_NOTIFY_ME, which
// package barrier turns into a locally complete high-water mark.
//
// # Memory
//
// RDMA memory is a Region: page-aligned memory mapped outside the Go heap,
// since a registration exposes whole pages and the kernel writes into it
// asynchronously. Spans name parts of a region. A region counts the
// registrations and in-flight operations using it and refuses to unmap
// until none is left. The small structures the kernel reads during sendmsg
// (the rds_iovec array, the cookie word) live in pooled heap scratch kept
// alive across the call.
//
// # Registration
//
// Conn.Register registers a span and sends a message carrying the cookie to
// the peer in one step. Two kernel mechanisms exist: the RDS_GET_MR socket
// option followed by an RDS_CMSG_RDMA_DEST message, and RDS_CMSG_RDMA_MAP,
// which registers and sends in one sendmsg. RDS_GET_MR fails with
// EOPNOTSUPP on FRWR adapters (every current RoCE adapter and Soft-RoCE),
// so RegAuto probes once and then uses the one that works. The first
// RDMA_MAP on a connection that is still coming up can fail with EAGAIN;
// Register retries it with a bounded backoff.
//
// Keys are freed with MR.Free (RDS_FREE_MR, invalidating when registered
// with cmsg.FlagInvalidate); cmsg.FlagUseOnce makes the kernel drop a key
// after the first RDMA against it; Conn.Flush flushes the transport's pool
// of unused registrations; closing the socket drops all of its keys.
//
// # Operations
//
// Conn.Do queues an RDMA READ or WRITE (Op) with local scatter/gather, an
// optional payload sent as immediate data, and the flags FENCE and SILENT;
// NOTIFY_ME is always set and the operation's barrier.Token is its
// user_token. Do returns once the kernel accepted the operation. The
// application's receive loop must hand every received control buffer to
// the tracker (Conn.HandleControl or Tracker().Process).
//
// # Pools
//
// A Pool registers a fixed set of buffers once. A buffer cycles Available
// → InTransmission (its cookie went to the peer, which reads or writes it)
// → Reading (the immediate data arrived; the reader consumes the data in
// place) → Returning → Available, so a steady stream of operations makes
// no registrations at all.
//
// # Atomics
//
// FetchAdd, CompareSwap and their masked forms are encoded (Atomic,
// Conn.DoAtomic) but disabled unless Options.AllowAtomics is set.
//
// BUG(rds): Freeing a registration does not revoke it at once. On Linux 6.1
// over Soft-RoCE a peer's RDMA WRITE with a freed, invalidated cookie still
// changed memory in most attempts. Do not reuse or unmap memory a peer may
// still target until the protocol says the peer is done with it; use
// cmsg.FlagUseOnce keys for single transfers, and a Pool, whose buffers
// return only when the reader releases them and get fresh keys after a
// failure (Buffer.Fail).
//
// BUG(rds): The kernel posts every RDS atomic as a masked atomic, which
// Soft-RoCE (rxe) does not implement: sendmsg succeeds, no completion
// status ever arrives, and no later message on that connection is
// delivered. This is why atomics need Options.AllowAtomics; use them only
// on hardware known to support masked atomics, and give them deadlines.
//
// BUG(rds): RDS_GET_MR and RDS_GET_MR_FOR_DEST fail with EOPNOTSUPP on FRWR
// adapters (the kernel's FRWR code leaves them unimplemented), so on those
// a registration always travels with a message to one peer.
package rdmaops
