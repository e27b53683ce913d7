/*
 * resetstall: the plain C reference for examples/rdmawrite's
 * TestIntegrationExampleReset: what the kernel does with an RDS/IB
 * connection that goes down while the peer holds a registration made over
 * it.
 *
 * One process, three RDS/IB sockets of TOS 0: a passive one (PASSIVE_IP,
 * PORT) registers 16 pages with RDS_CMSG_RDMA_MAP, sending the cookie to
 * an active one (ACTIVE_IP, PORT+1), which issues RDMA READs of one page
 * each with RDS_RDMA_NOTIFY_ME|RDS_RDMA_FENCE and 16 bytes of immediate
 * data, as the example does at depth 16. First 16 READs without a fault
 * (the baseline). Then a third socket (ACTIVE_IP, PORT+2) issues an RDMA
 * WRITE with a key the passive socket never issued, to PASSIVE_IP,
 * PORT+3: its remote access error drops the connection; the active socket
 * issues 16 READs right behind it. The program then counts, on the active
 * socket, the statuses of those 16 and, on the passive socket, their
 * immediate data:
 *
 *   held:   for HOLD_MS, with the passive socket's registration alive;
 *   freed:  for 3 s after RDS_FREE_MR of that key (with the flags
 *           FREE_FLAGS: 4 is RDS_RDMA_INVALIDATE) and a flush
 *           (RDS_FREE_MR of cookie 0);
 *   closed: after the passive socket is closed, until all 16 have a
 *           status, or 20 s.
 *
 * Measured on Debian's 6.1 and 6.12 (one VM, Soft-RoCE): nothing while
 * held; all 16 statuses (dropped, and remote error for one not yet posted
 * that went out with the freed key) within the freed phase, with either
 * FREE_FLAGS; no immediate data of the 16 ever arrives. The same on 6.12
 * with the owner on either address, setting the connection up or not,
 * on TOS values 50-53.
 *
 * Output, one line:
 *   RESETSTALL|free_flags=N|baseline_success=N|baseline_msgs=N|fault=STATUS|held_ms=N|
 *   held_status=N|held_msgs=N|freed_status=N|freed_msgs=N|closed_status=N|
 *   closed_ms=N|success=N|remote_error=N|dropped=N|other=N
 * (one line; closed_ms: from the close to the last status). Exit status 0
 * unless setup failed (1) or usage (2).
 *
 *   resetstall-c PASSIVE_IP ACTIVE_IP PORT [HOLD_MS [FREE_FLAGS [OWNER_FIRST [TOS]]]]
 *
 * With OWNER_FIRST 1 the passive socket (the owner of the registration)
 * sends the first hello, so that its side sets the connection up; TOS
 * (default 0) gives the three sockets a type of service, hence a
 * connection of their own.
 *
 * Build: gcc -O2 -static -Wall -Wextra -Werror -o resetstall-c resetstall.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/rds.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_RDS
#define AF_RDS 21
#endif
#ifndef SOL_RDS
#define SOL_RDS 276
#endif
#ifndef SIOCRDSSETTOS
#define SIOCRDSSETTOS 0x89E0
#endif

static uint8_t tos;

enum { DEPTH = 16, PAGES = 16 };

static long pagesz;

_Noreturn static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "resetstall-c: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int bound(struct in_addr ip, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = ip, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0)
		fail("socket(AF_RDS): %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fail("bind %s:%d: %s", inet_ntoa(ip), port, strerror(errno));
	if (tos && ioctl(fd, SIOCRDSSETTOS, &tos) < 0)
		fail("SIOCRDSSETTOS %u: %s", tos, strerror(errno));
	return fd;
}

/* msg is one received message and what its control data held: the
 * kernel puts as many status notices into one as its control buffer
 * takes. */
struct msg {
	char data[64];
	ssize_t n;
	int has_dest, nstatus;
	uint64_t dest, token[64];
	int32_t status[64];
};

/* recv_one waits up to ms for a message on fd: 1 if one came. */
static int recv_one(int fd, int ms, struct msg *r)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int k = poll(&p, 1, ms < 0 ? 0 : ms);
	if (k < 0 && errno != EINTR)
		fail("poll: %s", strerror(errno));
	if (k <= 0)
		return 0;
	union {
		char buf[64 * CMSG_SPACE(sizeof(struct rds_rdma_notify))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = r->data, .iov_len = sizeof(r->data)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	r->n = recvmsg(fd, &m, MSG_DONTWAIT);
	if (r->n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			fail("recvmsg: %s", strerror(errno));
		usleep(1000);
		return 0;
	}
	r->has_dest = r->nstatus = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_RDS)
			continue;
		if (c->cmsg_type == RDS_CMSG_RDMA_DEST && c->cmsg_len >= CMSG_LEN(sizeof(uint64_t))) {
			memcpy(&r->dest, CMSG_DATA(c), sizeof(r->dest));
			r->has_dest = 1;
		} else if (c->cmsg_type == RDS_CMSG_RDMA_STATUS && c->cmsg_len >= CMSG_LEN(sizeof(struct rds_rdma_notify)) &&
			   r->nstatus < 64) {
			struct rds_rdma_notify nt;
			memcpy(&nt, CMSG_DATA(c), sizeof(nt));
			r->token[r->nstatus] = nt.user_token;
			r->status[r->nstatus] = nt.status;
			r->nstatus++;
		}
	}
	return 1;
}

static void send_msg(int fd, struct in_addr ip, int port, const void *data, size_t len, void *ctl, size_t ctllen)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr = ip, .sin_port = htons((uint16_t)port)};
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr m = {.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = ctl, .msg_controllen = ctllen};
	for (int try = 0; try < 200; try++) {
		if (sendmsg(fd, &m, 0) >= 0)
			return;
		if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
			break;
		usleep(10000);
	}
	fail("sendmsg to %s:%d: %s", inet_ntoa(ip), port, strerror(errno));
}

/* hello sends hellos from a to b's address until b receives one (8 s). */
static void hello(int a, int b, struct in_addr ip, int port)
{
	for (int try = 0; try < 8; try++) {
		send_msg(a, ip, port, "hello", 5, NULL, 0);
		struct msg r;
		for (int64_t end = now_ms() + 1000; now_ms() < end;)
			if (recv_one(b, (int)(end - now_ms()), &r) && r.n == 5 && !memcmp(r.data, "hello", 5))
				return;
	}
	fail("no hello to %s:%d within 8 s", inet_ntoa(ip), port);
}

/* rdma issues one RDMA with NOTIFY_ME and token tok, with payload. */
static void rdma(int fd, struct in_addr ip, int port, uint64_t ck, uint64_t off, void *local, int write, uint64_t tok,
		 const void *payload, size_t plen)
{
	struct rds_iovec lv = {.addr = (uint64_t)(uintptr_t)local, .bytes = (uint64_t)pagesz};
	struct rds_rdma_args args = {
		.cookie = ck,
		.remote_vec = {.addr = off, .bytes = (uint64_t)pagesz},
		.local_vec_addr = (uint64_t)(uintptr_t)&lv,
		.nr_local = 1,
		.flags = RDS_RDMA_NOTIFY_ME | (write ? RDS_RDMA_READWRITE : RDS_RDMA_FENCE),
		.user_token = tok,
	};
	union {
		char buf[CMSG_SPACE(sizeof(args))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct cmsghdr *c = (struct cmsghdr *)ctl.buf;
	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RDS_CMSG_RDMA_ARGS;
	c->cmsg_len = CMSG_LEN(sizeof(args));
	memcpy(CMSG_DATA(c), &args, sizeof(args));
	send_msg(fd, ip, port, payload, plen, ctl.buf, sizeof(ctl.buf));
}

/* tally counts the statuses of tokens [lo, lo+DEPTH) and the immediate
 * data of the same operations. */
struct tally {
	int status, msgs;
	int n[5]; /* by status: success, remote error, canceled, dropped, other */
	int seen[DEPTH], got[DEPTH];
	int64_t last_ms;
};

static void take(struct tally *t, uint64_t lo, int fd, int passive, const struct msg *r)
{
	for (int i = 0; !passive && i < r->nstatus; i++) {
		uint64_t tok = r->token[i];
		if (tok < lo || tok >= lo + DEPTH || t->seen[tok - lo])
			continue;
		t->seen[tok - lo] = 1;
		t->status++;
		int s = r->status[i];
		t->n[s >= 0 && s <= 3 ? s : 4]++;
		t->last_ms = now_ms();
	}
	if (passive && r->n == 16) {
		uint64_t seq;
		memcpy(&seq, r->data, sizeof(seq));
		if (seq >= lo && seq < lo + DEPTH && !t->got[seq - lo]) {
			t->got[seq - lo] = 1;
			t->msgs++;
		}
	}
	(void)fd;
}

/* watch reads the active socket a and the passive socket p (if >= 0) for
 * ms, or, with until_all, until all DEPTH statuses (and with p, all DEPTH
 * immediate data messages) came. */
static void watch(struct tally *t, uint64_t lo, int a, int p, int ms, int until_all)
{
	int64_t end = now_ms() + ms;
	while (now_ms() < end && !(until_all && t->status == DEPTH && (p < 0 || t->msgs == DEPTH))) {
		struct pollfd fds[2] = {{.fd = a, .events = POLLIN}, {.fd = p, .events = POLLIN}};
		int k = poll(fds, p >= 0 ? 2 : 1, (int)(end - now_ms()));
		if (k < 0 && errno != EINTR)
			fail("poll: %s", strerror(errno));
		struct msg r;
		if (k > 0 && (fds[0].revents & POLLIN) && recv_one(a, 0, &r))
			take(t, lo, a, 0, &r);
		if (k > 0 && p >= 0 && (fds[1].revents & POLLIN) && recv_one(p, 0, &r))
			take(t, lo, p, 1, &r);
	}
}

/* reads issues DEPTH READs with tokens and sequence numbers [lo, lo+DEPTH). */
static void reads(int a, struct in_addr pip, int port, uint64_t ck, unsigned char *local, uint64_t lo)
{
	for (uint64_t i = 0; i < DEPTH; i++) {
		unsigned char imm[16];
		uint64_t seq = lo + i, slot = i;
		memcpy(imm, &seq, 8);
		memcpy(imm + 8, &slot, 8);
		rdma(a, pip, port, ck, slot * (uint64_t)pagesz, local + i * pagesz, 0, seq, imm, sizeof(imm));
	}
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 8) {
		fprintf(stderr, "usage: resetstall-c PASSIVE_IP ACTIVE_IP PORT [HOLD_MS [FREE_FLAGS [OWNER_FIRST [TOS]]]]\n");
		return 2;
	}
	struct in_addr pip, aip;
	if (!inet_aton(argv[1], &pip) || !inet_aton(argv[2], &aip)) {
		fprintf(stderr, "resetstall-c: bad address\n");
		return 2;
	}
	int port = atoi(argv[3]);
	int hold = argc >= 5 ? atoi(argv[4]) : 5000;
	uint64_t free_flags = argc >= 6 ? strtoull(argv[5], NULL, 0) : RDS_RDMA_INVALIDATE;
	int owner_first = argc >= 7 && atoi(argv[6]) != 0;
	tos = argc >= 8 ? (uint8_t)atoi(argv[7]) : 0;
	pagesz = sysconf(_SC_PAGESIZE);

	int p = bound(pip, port), a = bound(aip, port + 1), f = bound(aip, port + 2);
	if (owner_first) {
		hello(p, a, aip, port + 1);
		hello(a, p, pip, port);
	} else {
		hello(a, p, pip, port);
		hello(p, a, aip, port + 1);
	}

	unsigned char *mem = mmap(NULL, PAGES * (size_t)pagesz, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	unsigned char *local = mmap(NULL, DEPTH * (size_t)pagesz, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED || local == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	memset(mem, 0x5c, PAGES * (size_t)pagesz);

	/* The passive socket registers its pages for the active one. */
	uint64_t ck = 0;
	struct rds_get_mr_args ma = {
		.vec = {.addr = (uint64_t)(uintptr_t)mem, .bytes = PAGES * (uint64_t)pagesz},
		.cookie_addr = (uint64_t)(uintptr_t)&ck,
		.flags = RDS_RDMA_READWRITE,
	};
	union {
		char buf[CMSG_SPACE(sizeof(ma))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct cmsghdr *cm = (struct cmsghdr *)ctl.buf;
	cm->cmsg_level = SOL_RDS;
	cm->cmsg_type = RDS_CMSG_RDMA_MAP;
	cm->cmsg_len = CMSG_LEN(sizeof(ma));
	memcpy(CMSG_DATA(cm), &ma, sizeof(ma));
	send_msg(p, aip, port + 1, "buffer", 6, ctl.buf, sizeof(ctl.buf));
	struct msg r;
	uint64_t dest = 0;
	for (int64_t end = now_ms() + 10000; !dest && now_ms() < end;)
		if (recv_one(a, (int)(end - now_ms()), &r) && r.has_dest)
			dest = r.dest;
	if (!dest || dest != ck)
		fail("no registration message with cookie %#llx", (unsigned long long)ck);

	/* Baseline. */
	struct tally base = {0};
	reads(a, pip, port, ck, local, 0);
	watch(&base, 0, a, p, 10000, 1);

	/* The fault: a key never issued (r_key in the low 32 bits). */
	uint32_t bogus = (uint32_t)ck ^ 0x5a5a00u;
	rdma(f, pip, port + 3, (uint64_t)bogus, 0, local, 1, 1, "bogus", 5);
	reads(a, pip, port, ck, local, 1000);

	struct tally held = {0};
	watch(&held, 1000, a, p, hold, 0);
	int fault = -1;
	for (int64_t end = now_ms() + 100; fault < 0 && now_ms() < end;)
		if (recv_one(f, (int)(end - now_ms()), &r) && r.nstatus)
			fault = r.status[0];

	/* Free the key and flush. */
	struct rds_free_mr_args fr = {.cookie = ck, .flags = free_flags};
	if (setsockopt(p, SOL_RDS, RDS_FREE_MR, &fr, sizeof(fr)) < 0)
		fail("RDS_FREE_MR: %s", strerror(errno));
	struct rds_free_mr_args flush = {0};
	if (setsockopt(p, SOL_RDS, RDS_FREE_MR, &flush, sizeof(flush)) < 0)
		fail("RDS_FREE_MR (flush): %s", strerror(errno));
	struct tally freed = held;
	watch(&freed, 1000, a, p, 3000, 0);

	/* Close the passive socket. */
	struct tally closed = freed;
	close(p);
	int64_t at = now_ms();
	watch(&closed, 1000, a, -1, 20000, 1);
	if (fault < 0 && recv_one(f, 0, &r) && r.nstatus)
		fault = r.status[0];

	printf("RESETSTALL|owner_first=%d|tos=%u|free_flags=%llu|baseline_success=%d|baseline_msgs=%d|fault=%d|held_ms=%d|held_status=%d|held_msgs=%d|"
	       "freed_status=%d|freed_msgs=%d|closed_status=%d|closed_ms=%lld|success=%d|remote_error=%d|dropped=%d|other=%d\n",
	       owner_first, tos, (unsigned long long)free_flags, base.n[RDS_RDMA_SUCCESS], base.msgs, fault, hold, held.status, held.msgs, freed.status - held.status,
	       freed.msgs - held.msgs, closed.status - freed.status,
	       (long long)(closed.status > freed.status ? closed.last_ms - at : -1), closed.n[RDS_RDMA_SUCCESS],
	       closed.n[RDS_RDMA_REMOTE_ERROR], closed.n[RDS_RDMA_DROPPED], closed.n[RDS_RDMA_CANCELED] + closed.n[4]);
	close(a);
	close(f);
	return 0;
}
