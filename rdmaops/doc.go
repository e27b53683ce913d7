// Package rdmaops performs RDS RDMA: registering local memory for a peer,
// RDMA READ and WRITE with immediate data, atomics, and a pool of
// pre-registered buffers. Completion tracking is package barrier's.
//
// It builds on Linux on every architecture Go supports; the socket must use the InfiniBand transport (rds_rdma, including RoCE and
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
// after the first RDMA against it (not at once: see the BUG notes);
// Conn.Flush flushes the transport's pool of unused registrations; closing
// the socket drops all of its keys.
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
// # Revocation and the safe pattern
//
// A freed key keeps working for a while (see the BUG notes): the only
// protection that does not depend on kernel timing is to keep memory a
// peer may still target mapped and unused until the peer confirms it is
// done with the cookie. A Pool does that with Buffer.Revoke (free the key,
// hold the buffer out of circulation) and Buffer.Confirm (new key,
// Available again); a region is never unmapped while a registration or an
// operation counts as its user (Region.Close fails with ErrBusy), and its
// pages are its own, so a late transfer can only reach the memory that
// was registered. Conn.Close resolves the operations still in flight.
//
// BUG(rds): Freeing a registration does not revoke it at once. Measured
// on Linux 6.1 over Soft-RoCE (package integration/rdmafaults): a peer's
// RDMA WRITE with a freed, invalidated cookie still landed in 18 of 20
// attempts, also after RDS_FREE_MR with a zero cookie (Conn.Flush) and
// 200 ms later. The key died only after the owner's peer had acknowledged
// the message that carried the registration (any message from the peer
// carries the acknowledgement) and the transport's deferred flush ran.
// RDS_RDMA_USE_ONCE behaves the same: a second WRITE issued right after
// the first use's immediate data still landed; one issued a second later
// was refused. Closing the owner's socket killed its keys at once.
//
// BUG(rds): RDS registers whole pages, and FRWR registrations (Soft-RoCE,
// current RoCE adapters) always grant remote write access: measured, a
// peer READ of the whole page behind a 100-byte registration succeeded,
// and a WRITE into a key registered without RDS_RDMA_READWRITE landed.
// Only the page boundary protects memory; use Regions, never memory that
// shares pages with other data.
//
// BUG(rds): After a remote access error the kernel tears the RDS/IB
// connection down, and on Linux 6.1 its shutdown then hangs
// (rds_ib_conn_path_shutdown, in the single RDS work queue, so no RDS/IB
// connection of any TOS comes up meanwhile) until the socket that
// registered memory over that connection is closed; freeing and flushing
// the keys is not enough. After closing that socket the connection was
// back within 100 ms. An owner that sees a peer's operation fail, or loses
// contact, should close and reopen its socket and register again.
//
// BUG(rds): When the RDMA device goes away (Soft-RoCE device deleted and
// added again, package integration/twovmfaults), operations already
// posted end as RDS_RDMA_DROPPED and are not retried; one not yet posted
// goes out after the reconnect with whatever key it carries. A key
// announced before the outage must not be used after it: the owner has
// to close its socket to let the connection come back, and on 6.1 a
// registration made while a remote access error was tearing the
// connection down blocked for good in rds_ib_post_reg_frmr, together with
// the RDS work queue; on 6.12 such a registration returned a key that
// failed every use (rds_ib_reg_frmr does not check the registration's
// completion status). After an outage, ask the owner for a fresh key.
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
