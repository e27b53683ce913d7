/*
 * rdsbench.c: the C baseline of the go-rds benchmark.
 *
 * A plain program issuing the system calls a hand-written C application
 * would: blocking AF_RDS sockets, sendmsg/recvmsg loops (recvmmsg for the
 * batch receiver), RDMA WRITE with RDS_RDMA_NOTIFY_ME. The Go side of the
 * benchmark (package github.com/go-rds/rds/integration/internal/bench) implements the same roles
 * with the same arguments and prints the same result lines, so that the
 * driver (integration/cmd/rdsbench) can run the two alternately.
 *
 * Build: gcc -O2 -static -o rdsbench-c rdsbench.c
 *
 * Usage: rdsbench-c ROLE key=value...
 *
 *   recv         bind= size= [batch=] [warm=] [dur=] [netns=] [ts=1]
 *   send         bind= peer= size= [netns=]            (runs until killed)
 *   echo         bind= [size=] [netns=] [spin=]        (runs until killed)
 *   ping         bind= peer= size= [warm=] [dur=] [netns=] [spin=]
 *   rdma-target  bind= peer= size= [depth=]            (runs until killed)
 *   rdma-init    bind= peer= size= [depth=] [warm=] [dur=]
 *
 * Addresses are IPv4 "a.b.c.d:port". warm and dur are seconds: the
 * measurement window opens warm seconds after the first message (or
 * completion) and lasts dur seconds. Roles that wait for a peer print
 * "READY" once bound; measuring roles print "WINDOW" when their window
 * opens and end with one "RESULT key=value..." line. ts=1 switches SO_TIMESTAMP on, so that every received message
 * carries a control message, which the receiver parses. spin (seconds)
 * makes echo and ping busy-poll before blocking in recvmsg: they retry
 * with MSG_DONTWAIT, yielding the CPU between tries, for up to that long
 * (what rdssock's Config.BusyPoll does). Errors go to
 * stderr with exit status 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rds.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_RDS
#define AF_RDS 21
#endif

/* Control buffer handed to every data receive: the same size the Go side
 * uses (cmsg.MaxReceiveSpace). */
#define RECV_CONTROL 160

struct opts {
	struct sockaddr_in bind, peer;
	int have_bind, have_peer;
	size_t size;
	int batch;
	int depth;
	double warm, dur;
	const char *netns;
	int ts;
	double spin;
};

_Noreturn static void die(const char *what)
{
	fprintf(stderr, "rdsbench-c: %s: %s\n", what, strerror(errno));
	exit(1);
}

_Noreturn static void usage(const char *msg)
{
	fprintf(stderr, "rdsbench-c: %s\n", msg);
	exit(2);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		usage("address must be a.b.c.d:port");
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		usage("bad IPv4 address");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->batch = 1;
	o->depth = 1;
	o->warm = 0.5;
	o->dur = 2;
	o->size = 64;
	for (int i = 2; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq)
			usage("arguments are key=value");
		*eq = 0;
		const char *k = argv[i], *v = eq + 1;
		if (!strcmp(k, "bind")) {
			parse_addr(v, &o->bind);
			o->have_bind = 1;
		} else if (!strcmp(k, "peer")) {
			parse_addr(v, &o->peer);
			o->have_peer = 1;
		} else if (!strcmp(k, "size")) {
			o->size = strtoul(v, NULL, 0);
		} else if (!strcmp(k, "batch")) {
			o->batch = atoi(v);
		} else if (!strcmp(k, "depth")) {
			o->depth = atoi(v);
		} else if (!strcmp(k, "warm")) {
			o->warm = atof(v);
		} else if (!strcmp(k, "dur")) {
			o->dur = atof(v);
		} else if (!strcmp(k, "netns")) {
			o->netns = v;
		} else if (!strcmp(k, "ts")) {
			o->ts = atoi(v);
		} else if (!strcmp(k, "spin")) {
			o->spin = atof(v);
		} else {
			usage("unknown argument");
		}
	}
	if (!o->have_bind)
		usage("bind= is required");
	if (o->batch < 1 || o->depth < 1)
		usage("batch and depth must be at least 1");
}

static int rds_socket(const struct opts *o)
{
	if (o->netns) {
		int nfd = open(o->netns, O_RDONLY | O_CLOEXEC);
		if (nfd < 0)
			die(o->netns);
		if (setns(nfd, CLONE_NEWNET) < 0)
			die("setns");
		close(nfd);
	}
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0)
		die("socket(AF_RDS)");
	int one = 1;
	if (o->ts && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one)) < 0)
		die("setsockopt(SO_TIMESTAMP)");
	if (bind(fd, (struct sockaddr *)&o->bind, sizeof(o->bind)) < 0)
		die("bind");
	return fd;
}

static void ready(void)
{
	printf("READY\n");
	fflush(stdout);
}

/* window_open tells the driver that the measurement window has opened: it
 * reads the CPU time of both processes at this line and at RESULT. */
static void window_open(void)
{
	printf("WINDOW\n");
	fflush(stdout);
}

/* rss_kib returns the resident set size in KiB from /proc/self/smaps_rollup
 * (read with pread on a descriptor opened once), which walks the page
 * tables: /proc/self/statm lags behind on kernels that batch RSS counter
 * updates per thread, and reads near zero for a small static program. */
static long smaps_kib(int fd, const char *key)
{
	static char buf[4096];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strstr(buf, key);
	if (!p)
		return -1;
	return strtol(p + strlen(key), NULL, 10);
}

static long rss_kib(int fd)
{
	return smaps_kib(fd, "\nRss:");
}

/* anon_kib returns the anonymous memory (heap, stacks) in KiB. */
static long anon_kib(int fd)
{
	return smaps_kib(fd, "\nAnonymous:");
}

/* ctxt_switches returns the context switches of the whole system so far,
 * the "ctxt" line of /proc/stat, or -1. Read at the edges of a measurement
 * window, it tells how many switches the workload cost per message. */
static long long ctxt_switches(void)
{
	static char buf[65536];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strstr(buf, "\nctxt ");
	return p ? strtoll(p + 6, NULL, 10) : -1;
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p)
		die("calloc");
	return p;
}

/* recv: count messages (and bytes) in the measurement window. With
 * batch>1 it receives with recvmmsg(MSG_WAITFORONE). */
static int role_recv(const struct opts *o)
{
	int fd = rds_socket(o);
	int smaps = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
	int b = o->batch;
	struct mmsghdr *hdrs = xmalloc(sizeof(*hdrs) * b);
	struct iovec *iovs = xmalloc(sizeof(*iovs) * b);
	struct sockaddr_in6 *names = xmalloc(sizeof(*names) * b);
	char *data = xmalloc(o->size * b);
	char *ctl = xmalloc(RECV_CONTROL * b);
	ready();

	double first = 0, start = 0, end = 0, last = 0, next_rss = 0;
	uint64_t msgs = 0, bytes = 0, stamps = 0;
	long rss_start = -1, rss_end = -1, rss_max = -1, anon_start = -1, anon_end;
	long long ctxt_start = -1;
	long rss_10s = -1, anon_10s = -1; /* ten seconds into the window */
	for (;;) {
		int got;
		if (b == 1) {
			struct msghdr *m = &hdrs[0].msg_hdr;
			iovs[0].iov_base = data;
			iovs[0].iov_len = o->size;
			memset(m, 0, sizeof(*m));
			m->msg_name = &names[0];
			m->msg_namelen = sizeof(names[0]);
			m->msg_iov = &iovs[0];
			m->msg_iovlen = 1;
			m->msg_control = ctl;
			m->msg_controllen = RECV_CONTROL;
			ssize_t n = recvmsg(fd, m, 0);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				die("recvmsg");
			}
			hdrs[0].msg_len = (unsigned)n;
			got = 1;
		} else {
			for (int i = 0; i < b; i++) {
				struct msghdr *m = &hdrs[i].msg_hdr;
				iovs[i].iov_base = data + (size_t)i * o->size;
				iovs[i].iov_len = o->size;
				memset(m, 0, sizeof(*m));
				m->msg_name = &names[i];
				m->msg_namelen = sizeof(names[i]);
				m->msg_iov = &iovs[i];
				m->msg_iovlen = 1;
				m->msg_control = ctl + (size_t)i * RECV_CONTROL;
				m->msg_controllen = RECV_CONTROL;
			}
			got = recvmmsg(fd, hdrs, b, MSG_WAITFORONE, NULL);
			if (got < 0) {
				if (errno == EINTR)
					continue;
				die("recvmmsg");
			}
		}
		double t = now();
		if (first == 0) {
			first = t;
			continue;
		}
		if (start == 0) {
			if (t - first < o->warm)
				continue;
			start = t;
			end = start + o->dur;
			window_open();
			ctxt_start = ctxt_switches();
			rss_start = rss_max = rss_kib(smaps);
			anon_start = anon_kib(smaps);
			next_rss = start + 1;
			continue; /* the window opens after this receive */
		}
		for (int i = 0; i < got; i++) {
			if (hdrs[i].msg_hdr.msg_flags & MSG_TRUNC) {
				fprintf(stderr, "rdsbench-c: message truncated\n");
				exit(1);
			}
			bytes += hdrs[i].msg_len;
			if (!o->ts)
				continue;
			/* Walk the control messages as an application would. */
			struct msghdr *m = &hdrs[i].msg_hdr;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMP &&
				    c->cmsg_len == CMSG_LEN(sizeof(struct timeval)))
					stamps++;
			}
		}
		msgs += (uint64_t)got;
		last = t;
		if (t >= next_rss) {
			long r = rss_kib(smaps);
			if (r > rss_max)
				rss_max = r;
			if (rss_10s < 0 && t - start >= 10) {
				rss_10s = r;
				anon_10s = anon_kib(smaps);
			}
			next_rss = t + 1;
		}
		if (t >= end)
			break;
	}
	long long ctxt = ctxt_switches() - ctxt_start;
	rss_end = rss_kib(smaps);
	anon_end = anon_kib(smaps);
	if (rss_end > rss_max)
		rss_max = rss_end;
	double secs = last - start;
	printf("RESULT msgs=%llu bytes=%llu secs=%.6f rate=%.1f cmsgs=%llu rss_start_kib=%ld rss_end_kib=%ld rss_max_kib=%ld anon_start_kib=%ld anon_end_kib=%ld rss_10s_kib=%ld anon_10s_kib=%ld ctxt=%lld\n",
	       (unsigned long long)msgs, (unsigned long long)bytes, secs,
	       secs > 0 ? (double)msgs / secs : 0, (unsigned long long)stamps,
	       rss_start, rss_end, rss_max, anon_start, anon_end, rss_10s, anon_10s, ctxt);
	fflush(stdout);
	return 0;
}

/* send: send size-byte messages to peer until killed. A blocking RDS send
 * waits while the send buffer is full and while the destination port is
 * congested. */
_Noreturn static void role_send(const struct opts *o)
{
	if (!o->have_peer)
		usage("peer= is required");
	int fd = rds_socket(o);
	char *data = xmalloc(o->size);
	struct iovec iov = {.iov_base = data, .iov_len = o->size};
	struct msghdr m = {
		.msg_name = (void *)&o->peer,
		.msg_namelen = sizeof(o->peer),
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	ready();
	for (;;) {
		if (sendmsg(fd, &m, 0) < 0) {
			if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN)
				continue;
			die("sendmsg");
		}
	}
}

/* spin_recvmsg is recvmsg that first busy-polls: with spin > 0 it retries
 * with MSG_DONTWAIT, calling sched_yield between tries, for up to spin
 * seconds, and only then blocks. */
static ssize_t spin_recvmsg(int fd, struct msghdr *m, double spin)
{
	int64_t end = 0;
	while (spin > 0) {
		ssize_t n = recvmsg(fd, m, MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			return n;
		int64_t t = now_ns();
		if (end == 0)
			end = t + (int64_t)(spin * 1e9);
		else if (t >= end)
			break;
		sched_yield();
	}
	return recvmsg(fd, m, 0);
}

/* echo: send every message back to its sender, until killed. */
_Noreturn static void role_echo(const struct opts *o)
{
	int fd = rds_socket(o);
	size_t cap = o->size > 65536 ? o->size : 65536;
	char *data = xmalloc(cap);
	char ctl[RECV_CONTROL];
	struct sockaddr_in6 from;
	struct iovec iov;
	struct msghdr m;
	ready();
	for (;;) {
		iov.iov_base = data;
		iov.iov_len = cap;
		memset(&m, 0, sizeof(m));
		m.msg_name = &from;
		m.msg_namelen = sizeof(from);
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		ssize_t n = spin_recvmsg(fd, &m, o->spin);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("recvmsg");
		}
		if (m.msg_namelen == 0)
			continue; /* a control-only notice */
		iov.iov_len = (size_t)n;
		m.msg_control = NULL;
		m.msg_controllen = 0;
		m.msg_flags = 0;
		while (sendmsg(fd, &m, 0) < 0) {
			if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
				die("sendmsg");
		}
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t percentile(const int64_t *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i];
}

/* ping: request/response round trips with the echo role; reports the
 * p50 and p99 round-trip time in the window. */
static int role_ping(const struct opts *o)
{
	if (!o->have_peer)
		usage("peer= is required");
	int fd = rds_socket(o);
	size_t maxn = 1u << 20;
	int64_t *rtt = xmalloc(sizeof(int64_t) * maxn);
	size_t nrtt = 0;
	char *out = xmalloc(o->size), *in = xmalloc(o->size);
	char ctl[RECV_CONTROL];
	struct sockaddr_in6 from;
	struct iovec siov = {.iov_base = out, .iov_len = o->size}, riov;
	struct msghdr sm = {
		.msg_name = (void *)&o->peer,
		.msg_namelen = sizeof(o->peer),
		.msg_iov = &siov,
		.msg_iovlen = 1,
	}, rm;
	double first = now(), start = 0, end = 0;
	long long ctxt_start = -1;
	for (;;) {
		int64_t t0 = now_ns();
		while (sendmsg(fd, &sm, 0) < 0) {
			if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
				die("sendmsg");
		}
		for (;;) {
			riov.iov_base = in;
			riov.iov_len = o->size;
			memset(&rm, 0, sizeof(rm));
			rm.msg_name = &from;
			rm.msg_namelen = sizeof(from);
			rm.msg_iov = &riov;
			rm.msg_iovlen = 1;
			rm.msg_control = ctl;
			rm.msg_controllen = sizeof(ctl);
			ssize_t n = spin_recvmsg(fd, &rm, o->spin);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				die("recvmsg");
			}
			if (rm.msg_namelen != 0)
				break; /* the reply; control-only notices are skipped */
		}
		int64_t t1 = now_ns();
		double t = (double)t1 * 1e-9;
		if (start == 0) {
			if (t - first >= o->warm) {
				start = t;
				end = start + o->dur;
				window_open();
				ctxt_start = ctxt_switches();
			}
			continue;
		}
		if (nrtt < maxn)
			rtt[nrtt++] = t1 - t0;
		if (t >= end)
			break;
	}
	long long ctxt = ctxt_switches() - ctxt_start;
	qsort(rtt, nrtt, sizeof(rtt[0]), cmp_i64);
	printf("RESULT msgs=%zu secs=%.6f rate=%.1f p50_ns=%lld p99_ns=%lld ctxt=%lld ctxt_per_msg=%.3f\n", nrtt, end - start,
	       (double)nrtt / (end - start), (long long)percentile(rtt, nrtt, 0.50),
	       (long long)percentile(rtt, nrtt, 0.99), ctxt, (double)ctxt / (double)(nrtt ? nrtt : 1));
	fflush(stdout);
	return 0;
}

static void *map_region(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

/* rdma-target: register size*depth bytes for remote writes with one
 * RDS_CMSG_RDMA_MAP message to peer, then drain incoming messages until
 * killed. */
_Noreturn static void role_rdma_target(const struct opts *o)
{
	if (!o->have_peer)
		usage("peer= is required");
	int fd = rds_socket(o);
	size_t len = o->size * (size_t)o->depth;
	char *region = map_region(len);
	uint64_t cookie = 0;
	struct rds_get_mr_args args = {
		.vec = {.addr = (uint64_t)(uintptr_t)region, .bytes = len},
		.cookie_addr = (uint64_t)(uintptr_t)&cookie,
		.flags = RDS_RDMA_READWRITE,
	};
	union {
		char buf[CMSG_SPACE(sizeof(args))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct cmsghdr *c = (struct cmsghdr *)ctl.buf;
	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RDS_CMSG_RDMA_MAP;
	c->cmsg_len = CMSG_LEN(sizeof(args));
	memcpy(CMSG_DATA(c), &args, sizeof(args));
	char hello[] = "map";
	struct iovec iov = {.iov_base = hello, .iov_len = sizeof(hello)};
	struct msghdr m = {
		.msg_name = (void *)&o->peer,
		.msg_namelen = sizeof(o->peer),
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	/* The first RDMA_MAP on a connection still coming up can fail with
	 * EAGAIN. */
	for (int tries = 0;; tries++) {
		if (sendmsg(fd, &m, 0) >= 0)
			break;
		if ((errno != EAGAIN && errno != EINTR && errno != ENOBUFS) || tries > 200)
			die("sendmsg(RDMA_MAP)");
		usleep(10000);
	}
	ready();
	char buf[1024], rctl[RECV_CONTROL];
	struct sockaddr_in6 from;
	for (;;) {
		struct iovec riov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr rm = {
			.msg_name = &from,
			.msg_namelen = sizeof(from),
			.msg_iov = &riov,
			.msg_iovlen = 1,
			.msg_control = rctl,
			.msg_controllen = sizeof(rctl),
		};
		if (recvmsg(fd, &rm, 0) < 0 && errno != EINTR)
			die("recvmsg");
	}
}

/* rdma-init: wait for the target's cookie, then issue RDMA WRITEs of size
 * bytes with RDS_RDMA_NOTIFY_ME, keeping depth of them outstanding, and
 * count completions in the window. */
static int role_rdma_init(const struct opts *o)
{
	if (!o->have_peer)
		usage("peer= is required");
	int fd = rds_socket(o);
	ready();
	int smaps = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
	int depth = o->depth;
	size_t ctllen = CMSG_SPACE(sizeof(struct rds_rdma_notify)) * (size_t)depth;
	if (ctllen < RECV_CONTROL)
		ctllen = RECV_CONTROL;
	char *rctl = xmalloc(ctllen);
	char buf[1024];
	struct sockaddr_in6 from;
	uint64_t cookie = 0;
	int have_cookie = 0;
	while (!have_cookie) {
		struct iovec riov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr rm = {
			.msg_name = &from,
			.msg_namelen = sizeof(from),
			.msg_iov = &riov,
			.msg_iovlen = 1,
			.msg_control = rctl,
			.msg_controllen = ctllen,
		};
		if (recvmsg(fd, &rm, 0) < 0) {
			if (errno == EINTR)
				continue;
			die("recvmsg(cookie)");
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&rm); c; c = CMSG_NXTHDR(&rm, c)) {
			if (c->cmsg_level == SOL_RDS && c->cmsg_type == RDS_CMSG_RDMA_DEST) {
				memcpy(&cookie, CMSG_DATA(c), sizeof(cookie));
				have_cookie = 1;
			}
		}
	}

	size_t len = o->size * (size_t)depth;
	char *local = map_region(len);
	memset(local, 0x5a, len);
	struct rds_iovec *lvec = xmalloc(sizeof(*lvec) * depth);
	union {
		char buf[CMSG_SPACE(sizeof(struct rds_rdma_args))];
		struct cmsghdr align;
	} sctl;
	memset(&sctl, 0, sizeof(sctl));
	struct cmsghdr *sc = (struct cmsghdr *)sctl.buf;
	sc->cmsg_level = SOL_RDS;
	sc->cmsg_type = RDS_CMSG_RDMA_ARGS;
	sc->cmsg_len = CMSG_LEN(sizeof(struct rds_rdma_args));
	struct msghdr sm = {
		.msg_name = (void *)&o->peer,
		.msg_namelen = sizeof(o->peer),
		.msg_control = sctl.buf,
		.msg_controllen = sizeof(sctl.buf),
	};

	uint64_t token = 0, done = 0, failed = 0, inwin = 0;
	int inflight = 0;
	double first = 0, start = 0, end = 0, last = 0;
	long rss_start = -1, rss_end;
	for (;;) {
		while (inflight < depth) {
			int slot = (int)(token % (uint64_t)depth);
			lvec[slot].addr = (uint64_t)(uintptr_t)(local + (size_t)slot * o->size);
			lvec[slot].bytes = o->size;
			struct rds_rdma_args a = {
				.cookie = cookie,
				.remote_vec = {.addr = (uint64_t)slot * o->size, .bytes = o->size},
				.local_vec_addr = (uint64_t)(uintptr_t)&lvec[slot],
				.nr_local = 1,
				.flags = RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
				.user_token = ++token,
			};
			memcpy(CMSG_DATA(sc), &a, sizeof(a));
			while (sendmsg(fd, &sm, 0) < 0) {
				if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
					die("sendmsg(RDMA_ARGS)");
			}
			inflight++;
		}
		struct iovec riov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr rm = {
			.msg_name = &from,
			.msg_namelen = sizeof(from),
			.msg_iov = &riov,
			.msg_iovlen = 1,
			.msg_control = rctl,
			.msg_controllen = ctllen,
		};
		if (recvmsg(fd, &rm, 0) < 0) {
			if (errno == EINTR)
				continue;
			die("recvmsg(status)");
		}
		int got = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&rm); c; c = CMSG_NXTHDR(&rm, c)) {
			if (c->cmsg_level != SOL_RDS || c->cmsg_type != RDS_CMSG_RDMA_STATUS)
				continue;
			struct rds_rdma_notify nt;
			memcpy(&nt, CMSG_DATA(c), sizeof(nt));
			if (nt.status != RDS_RDMA_SUCCESS)
				failed++;
			got++;
		}
		inflight -= got;
		done += (uint64_t)got;
		if (got == 0)
			continue;
		double t = now();
		if (first == 0)
			first = t;
		if (start == 0) {
			if (t - first >= o->warm) {
				start = t;
				end = start + o->dur;
				window_open();
				rss_start = rss_kib(smaps);
			}
			continue;
		}
		inwin += (uint64_t)got;
		last = t;
		if (t >= end)
			break;
	}
	rss_end = rss_kib(smaps);
	double secs = last - start;
	printf("RESULT msgs=%llu secs=%.6f rate=%.1f failed=%llu completed=%llu rss_start_kib=%ld rss_end_kib=%ld\n",
	       (unsigned long long)inwin, secs, secs > 0 ? (double)inwin / secs : 0,
	       (unsigned long long)failed, (unsigned long long)done, rss_start, rss_end);
	fflush(stdout);
	if (failed) {
		fprintf(stderr, "rdsbench-c: %llu RDMA operations failed\n", (unsigned long long)failed);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage("usage: rdsbench-c recv|send|echo|ping|rdma-target|rdma-init key=value...");
	struct opts o;
	parse_opts(argc, argv, &o);
	const char *role = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(role, "recv"))
		return role_recv(&o);
	if (!strcmp(role, "send"))
		role_send(&o);
	if (!strcmp(role, "echo"))
		role_echo(&o);
	if (!strcmp(role, "ping"))
		return role_ping(&o);
	if (!strcmp(role, "rdma-target"))
		role_rdma_target(&o);
	if (!strcmp(role, "rdma-init"))
		return role_rdma_init(&o);
	usage("unknown role");
}
