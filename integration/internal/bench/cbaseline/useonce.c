/*
 * useonce: the plain C reference for integration/rdmafaults' writes into a
 * dead key (TestUseOnceKey, TestPoolQuarantine).
 *
 * Per trial, on the type of service (hence the RDS/IB connection) the TOS
 * list gives it: a client socket registers one page with RDS_CMSG_RDMA_MAP and the flags
 * RDS_RDMA_READWRITE|RDS_RDMA_USE_ONCE|RDS_RDMA_INVALIDATE, sending the
 * cookie to a server socket; the server issues RDMA WRITEs with
 * RDS_RDMA_NOTIFY_ME and a payload into it: the first, a second at once,
 * and, if the second landed, a third one second later. Each status
 * (RDS_CMSG_RDMA_STATUS) is recorded; memory and delivered payloads are
 * checked like the Go test checks them.
 *
 * With LIVE > 0 the client first registers LIVE more pages (read-write,
 * not use-once) and sends their cookies to the server, and keeps them
 * registered until the trial ends, as a pool of buffers does (the Go
 * TestPoolQuarantine's stray write is judged against that form).
 *
 * MODE bogus (the Go tests' writes with a bogus cookie, TestBogusAndStaleCookies
 * and TestIntegrationBarrierMark): the client registers its page
 * read-write (not use-once) and announces it, and the server issues one
 * WRITE with a cookie never issued, the real key's rkey XOR 0x5a5a00 at
 * offset 0, as the Go tests build it; it must be refused, leave memory
 * alone and never deliver its payload.
 *
 * Output: one line per trial and a summary line per step,
 *   useonce-c: STEP ops=N success=N remote_error=N canceled=N dropped=N other=N timeout=N
 * for STEP first, second, later (MODE useonce) or bogus (MODE bogus); and
 * "useonce-c: violations=N" (a refused write that changed memory or
 * delivered its payload, or a landed one that did not). Exit status 0
 * unless setup failed (1) or usage (2).
 *
 *   useonce-c SERVER_IP CLIENT_IP PORT TOS,TOS,... TRIALS [LIVE [MODE]]
 *
 * Attempt k uses ports PORT+2k (server) and PORT+2k+1 (client) and the
 * k-th TOS of the list (values may repeat: a connection is reused once its
 * sockets are closed); an attempt whose connection does not come up
 * within 8 s is given up for the next.
 *
 * Build: gcc -O2 -static -Wall -Wextra -Werror -o useonce-c useonce.c
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

enum { ST_SUCCESS, ST_REMOTE, ST_CANCELED, ST_DROPPED, ST_OTHER, ST_TIMEOUT, NST };
static const char *st_name[NST] = {"success", "remote_error", "canceled", "dropped", "other", "timeout"};

struct step {
	int n[NST];
	int ops;
};

static struct step first, second, later, bogus;
static int violations;
static long pagesz;
static int live;      /* registrations the client holds through a trial */
static int bogusmode; /* MODE bogus */

_Noreturn static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "useonce-c: ");
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

static int status_of(int32_t s)
{
	switch (s) {
	case RDS_RDMA_SUCCESS:
		return ST_SUCCESS;
	case RDS_RDMA_REMOTE_ERROR:
		return ST_REMOTE;
	case RDS_RDMA_CANCELED:
		return ST_CANCELED;
	case RDS_RDMA_DROPPED:
		return ST_DROPPED;
	}
	return ST_OTHER;
}

static int sock_at(const struct sockaddr_in *sa, uint8_t tos)
{
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0)
		fail("socket(AF_RDS): %s", strerror(errno));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		fail("bind %s:%u: %s", inet_ntoa(sa->sin_addr), ntohs(sa->sin_port), strerror(errno));
	if (ioctl(fd, SIOCRDSSETTOS, &tos) < 0)
		fail("SIOCRDSSETTOS %u: %s", tos, strerror(errno));
	return fd;
}

/* rcv is one received message: payload, and what its control data held. */
struct rcv {
	char data[64];
	ssize_t n;
	int has_dest, has_status;
	uint64_t dest, token;
	int32_t status;
};

static long spurious;

/* recv_one waits up to ms for one message on fd; 0 if none came (callers
 * loop until their deadline). */
static int recv_one(int fd, int ms, struct rcv *r)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int k = poll(&p, 1, ms);
	if (k < 0 && errno != EINTR)
		fail("poll: %s", strerror(errno));
	if (k <= 0)
		return 0;
	union {
		char buf[1024];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = r->data, .iov_len = sizeof(r->data)};
	struct sockaddr_in from;
	struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	r->n = recvmsg(fd, &m, MSG_DONTWAIT);
	if (r->n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			fail("recvmsg: %s", strerror(errno));
		/* Readable, yet nothing to read: do not spin. */
		spurious++;
		usleep(1000);
		return 0;
	}
	r->has_dest = r->has_status = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_RDS)
			continue;
		if (c->cmsg_type == RDS_CMSG_RDMA_DEST && c->cmsg_len >= CMSG_LEN(sizeof(uint64_t))) {
			memcpy(&r->dest, CMSG_DATA(c), sizeof(r->dest));
			r->has_dest = 1;
		} else if (c->cmsg_type == RDS_CMSG_RDMA_STATUS && c->cmsg_len >= CMSG_LEN(sizeof(struct rds_rdma_notify))) {
			struct rds_rdma_notify nt;
			memcpy(&nt, CMSG_DATA(c), sizeof(nt));
			r->token = nt.user_token;
			r->status = nt.status;
			r->has_status = 1;
		}
	}
	return 1;
}

/* recv_data waits up to ms for a message with data or a cookie, skipping
 * repeated hellos; 0 on timeout. */
static int recv_data(int fd, int ms, struct rcv *r)
{
	int64_t end = now_ms() + ms;
	for (;;) {
		int left = (int)(end - now_ms());
		if (left < 0)
			return 0;
		if (!recv_one(fd, left, r))
			continue;
		if ((r->n > 0 || r->has_dest) && !(r->n == 5 && !memcmp(r->data, "hello", 5)))
			return 1;
	}
}

static int send_msg(int fd, const struct sockaddr_in *to, const char *data, void *ctl, size_t ctllen)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = strlen(data)};
	struct msghdr m = {.msg_name = (void *)to, .msg_namelen = sizeof(*to), .msg_iov = &iov, .msg_iovlen = 1,
			   .msg_control = ctl, .msg_controllen = ctllen};
	for (int try = 0; try < 100; try++) {
		if (sendmsg(fd, &m, 0) >= 0)
			return 0;
		if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
			return -1;
		usleep(20000);
	}
	return -1;
}

/* hello brings the connection up in one direction: 0 if b got a hello
 * from a within 8 s. */
static int hello(int a, int b, const struct sockaddr_in *to_b)
{
	for (int try = 0; try < 8; try++) {
		if (send_msg(a, to_b, "hello", NULL, 0) < 0)
			fail("hello: %s", strerror(errno));
		struct rcv r;
		int64_t end = now_ms() + 1000;
		for (int left; (left = (int)(end - now_ms())) >= 0;)
			if (recv_one(b, left, &r) && r.n == 5 && !memcmp(r.data, "hello", 5))
				return 0;
	}
	return -1;
}

/* write_wait issues an RDMA WRITE of src into cookie ck with payload and
 * waits up to 10 s for its status. */
static int write_wait(int fd, const struct sockaddr_in *to, uint64_t ck, void *src, const char *payload, uint64_t token)
{
	struct rds_iovec local = {.addr = (uint64_t)(uintptr_t)src, .bytes = (uint64_t)pagesz};
	struct rds_rdma_args args = {
		.cookie = ck,
		.remote_vec = {.addr = 0, .bytes = (uint64_t)pagesz},
		.local_vec_addr = (uint64_t)(uintptr_t)&local,
		.nr_local = 1,
		.flags = RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
		.user_token = token,
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
	if (send_msg(fd, to, payload, ctl.buf, sizeof(ctl.buf)) < 0)
		fail("sendmsg(RDS_CMSG_RDMA_ARGS) %s: %s", payload, strerror(errno));
	int64_t end = now_ms() + 10000;
	struct rcv r;
	for (int left; (left = (int)(end - now_ms())) >= 0;)
		if (recv_one(fd, left, &r) && r.has_status && r.token == token)
			return status_of(r.status);
	return ST_TIMEOUT;
}

static int all_byte(const unsigned char *b, unsigned char v)
{
	for (long i = 0; i < pagesz; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

static void count(struct step *s, int st)
{
	s->ops++;
	s->n[st]++;
}

static void violation(int trial, const char *what)
{
	violations++;
	printf("useonce-c: trial %d: VIOLATION: %s\n", trial, what);
}

/* trial runs one trial; -1 if the connection did not come up. */
static int trial(int i, struct in_addr sip, struct in_addr cip, int port, uint8_t tos)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = sip, .sin_port = htons((uint16_t)(port))};
	struct sockaddr_in ca = {.sin_family = AF_INET, .sin_addr = cip, .sin_port = htons((uint16_t)(port + 1))};
	int s = sock_at(&sa, tos), c = sock_at(&ca, tos);
	int ret = 0;
	unsigned char *creg = NULL, *sreg = NULL, *lreg = NULL;
	if (hello(c, s, &sa) < 0 || hello(s, c, &ca) < 0) {
		printf("useonce-c: trial %d: TOS %u: no connection within 8 s\n", i, tos);
		ret = -1;
		goto out;
	}
	/* The live registrations, each announced to the server. */
	if (live > 0) {
		lreg = mmap(NULL, (size_t)live * (size_t)pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (lreg == MAP_FAILED)
			fail("mmap: %s", strerror(errno));
		for (int j = 0; j < live; j++) {
			uint64_t lck = 0;
			struct rds_get_mr_args la = {
				.vec = {.addr = (uint64_t)(uintptr_t)(lreg + (size_t)j * (size_t)pagesz), .bytes = (uint64_t)pagesz},
				.cookie_addr = (uint64_t)(uintptr_t)&lck,
				.flags = RDS_RDMA_READWRITE,
			};
			union {
				char buf[CMSG_SPACE(sizeof(la))];
				struct cmsghdr align;
			} lctl;
			memset(&lctl, 0, sizeof(lctl));
			struct cmsghdr *lc = (struct cmsghdr *)lctl.buf;
			lc->cmsg_level = SOL_RDS;
			lc->cmsg_type = RDS_CMSG_RDMA_MAP;
			lc->cmsg_len = CMSG_LEN(sizeof(la));
			memcpy(CMSG_DATA(lc), &la, sizeof(la));
			if (send_msg(c, &sa, "live", lctl.buf, sizeof(lctl.buf)) < 0)
				fail("sendmsg(RDS_CMSG_RDMA_MAP) live: %s", strerror(errno));
			struct rcv lr;
			if (!recv_data(s, 10000, &lr) || !lr.has_dest || lr.dest != lck)
				fail("trial %d: no live registration message", i);
		}
	}
	creg = mmap(NULL, (size_t)pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	sreg = mmap(NULL, 3 * (size_t)pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (creg == MAP_FAILED || sreg == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	memset(sreg, 0x11, (size_t)pagesz);
	memset(sreg + pagesz, 0x22, (size_t)pagesz);
	memset(sreg + 2 * pagesz, 0x33, (size_t)pagesz);

	/* The client registers its page for the server. */
	uint64_t ck = 0;
	struct rds_get_mr_args ma = {
		.vec = {.addr = (uint64_t)(uintptr_t)creg, .bytes = (uint64_t)pagesz},
		.cookie_addr = (uint64_t)(uintptr_t)&ck,
		.flags = bogusmode ? RDS_RDMA_READWRITE : RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE | RDS_RDMA_INVALIDATE,
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
	if (send_msg(c, &sa, "key", ctl.buf, sizeof(ctl.buf)) < 0)
		fail("sendmsg(RDS_CMSG_RDMA_MAP): %s", strerror(errno));
	struct rcv r;
	if (!recv_data(s, 10000, &r) || !r.has_dest || r.dest != ck)
		fail("trial %d: no registration message with cookie %#llx", i, (unsigned long long)ck);
	memset(creg, 0x4b, (size_t)pagesz);

	if (bogusmode) {
		/* A cookie is the rkey in its low 32 bits, the offset above. */
		uint64_t bad = (uint64_t)((uint32_t)ck ^ 0x5a5a00u);
		int64_t t0 = now_ms();
		int st = write_wait(s, &ca, bad, sreg, "bogus", 1);
		count(&bogus, st);
		if (st == ST_SUCCESS)
			violation(i, "write with a bogus cookie succeeded");
		if (!all_byte(creg, 0x4b))
			violation(i, "write with a bogus cookie changed memory");
		if (recv_data(c, 200, &r))
			violation(i, "immediate data of the bogus write was delivered");
		printf("useonce-c: trial %d: TOS %u: bogus %s after %lld ms\n", i, tos, st_name[st], (long long)(now_ms() - t0));
		goto out;
	}

	int st = write_wait(s, &ca, ck, sreg, "first", 1);
	count(&first, st);
	if (st != ST_SUCCESS)
		fail("trial %d: first write with a use-once key: %s", i, st_name[st]);
	if (!recv_data(c, 10000, &r) || r.n != 5 || memcmp(r.data, "first", 5))
		fail("trial %d: no first immediate data", i);
	if (!all_byte(creg, 0x11))
		fail("trial %d: first write did not land", i);

	st = write_wait(s, &ca, ck, sreg + pagesz, "second", 2);
	count(&second, st);
	const char *sst = st_name[st];
	unsigned char want = 0x11;
	if (st == ST_SUCCESS) {
		want = 0x22;
		if (!recv_data(c, 10000, &r) || r.n != 6 || memcmp(r.data, "second", 6))
			violation(i, "second write succeeded, its immediate data did not arrive");
	}
	if (!all_byte(creg, want))
		violation(i, "second write: memory does not agree with its status");
	const char *lst = "-";
	if (st == ST_SUCCESS) {
		sleep(1);
		st = write_wait(s, &ca, ck, sreg + 2 * pagesz, "third", 3);
		count(&later, st);
		lst = st_name[st];
		if (st == ST_SUCCESS)
			violation(i, "write a second after the use succeeded");
		if (!all_byte(creg, st == ST_SUCCESS ? 0x33 : want))
			violation(i, "write a second after the use: memory does not agree with its status");
		if (st != ST_SUCCESS && recv_data(c, 200, &r))
			violation(i, "immediate data of the refused write was delivered");
	}
	printf("useonce-c: trial %d: TOS %u: second %s, later %s\n", i, tos, sst, lst);
out:
	close(s);
	close(c);
	if (lreg)
		munmap(lreg, (size_t)live * (size_t)pagesz);
	if (creg && creg != MAP_FAILED)
		munmap(creg, (size_t)pagesz);
	if (sreg && sreg != MAP_FAILED)
		munmap(sreg, 3 * (size_t)pagesz);
	return ret;
}

static void summary(const char *name, const struct step *s)
{
	printf("useonce-c: %s ops=%d", name, s->ops);
	for (int k = 0; k < NST; k++)
		printf(" %s=%d", st_name[k], s->n[k]);
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc < 6 || argc > 8) {
		fprintf(stderr, "usage: useonce-c SERVER_IP CLIENT_IP PORT TOS,TOS,... TRIALS [LIVE [MODE]]\n");
		return 2;
	}
	struct in_addr sip, cip;
	if (!inet_aton(argv[1], &sip) || !inet_aton(argv[2], &cip)) {
		fprintf(stderr, "useonce-c: bad address\n");
		return 2;
	}
	int port = atoi(argv[3]), trials = atoi(argv[5]);
	if (argc >= 7) {
		live = atoi(argv[6]);
		if (live < 0 || live > 64) {
			fprintf(stderr, "useonce-c: bad LIVE count %s\n", argv[6]);
			return 2;
		}
	}
	if (argc == 8) {
		if (!strcmp(argv[7], "bogus"))
			bogusmode = 1;
		else if (strcmp(argv[7], "useonce")) {
			fprintf(stderr, "useonce-c: bad MODE %s (useonce or bogus)\n", argv[7]);
			return 2;
		}
	}
	uint8_t tos[256];
	int ntos = 0;
	for (char *p = argv[4], *e; *p && ntos < 256; p = *e ? e + 1 : e) {
		long v = strtol(p, &e, 10);
		if (e == p || v < 1 || v > 255 || (*e && *e != ',')) {
			fprintf(stderr, "useonce-c: bad TOS list %s\n", argv[4]);
			return 2;
		}
		tos[ntos++] = (uint8_t)v;
	}
	if (port < 1 || port > 65535 - 2 * ntos || trials < 1) {
		fprintf(stderr, "useonce-c: bad port or trial count\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pagesz = sysconf(_SC_PAGESIZE);
	int next = 0;
	for (int i = 0; i < trials; i++) {
		for (;;) {
			if (next >= ntos)
				fail("out of TOS values after %d trials", i);
			int k = next++;
			if (trial(i, sip, cip, port + 2 * k, tos[k]) == 0)
				break;
		}
	}
	if (bogusmode) {
		summary("bogus", &bogus);
	} else {
		summary("first", &first);
		summary("second", &second);
		summary("later", &later);
	}
	printf("useonce-c: violations=%d (readable with nothing to read: %ld)\n", violations, spurious);
	return 0;
}
