/*
 * rdsstress.c: the C stress baseline of go-rds, a load generator of the
 * classic rds-stress shape, to compare `rdscat stress` and the rdmaops API
 * against.
 *
 * One program per side. The passive side (like `rdscat stress -listen`)
 * forks one process per task, each with its own RDS socket bound to port
 * P+i; it answers every request (rr), counts (oneway), or registers RDMA
 * buffers once and counts the immediate data of the operations aimed at
 * them. The active side (like `rdscat stress -to`) forks one process per
 * task, each with its own socket talking to passive port P+i, that keeps
 * `depth` requests or RDMA operations in flight from one poll() loop.
 *
 * Tasks are forked processes, not threads: that is what C users of
 * rds-stress do, it keeps every task's loop free of locks and shared
 * cache lines, and getrusage(RUSAGE_SELF) then measures exactly one task.
 * The tasks report into a shared anonymous mapping that the parent sums.
 *
 * Plain C, libc and <linux/rds.h> only:
 *
 *	gcc -O2 -static -Wall -Wextra -Werror -o rdsstress-c rdsstress.c
 *
 * Run it without arguments for the usage text.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rds.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_RDS
#define AF_RDS 21
#endif
#ifndef SOL_RDS
#define SOL_RDS 276
#endif

static const char usage_text[] =
"usage: rdsstress-c passive bind=ADDR:PORT [tasks=N] [size=BYTES] [timeout=S] [netns=PATH]\n"
"       rdsstress-c active bind=ADDR[:PORT] peer=ADDR:PORT [mode=rr|oneway] [tasks=N]\n"
"                   [depth=N] [size=BYTES] [ack-size=BYTES] [warm=S] [dur=S] [timeout=S] [netns=PATH]\n"
"       rdsstress-c active bind=ADDR peer=ADDR:PORT rdma=write|read [rdma-size=BYTES]\n"
"                   [notify=N] [verify=1] [fence=0|1] [tasks=N] [depth=N] [warm=S] [dur=S] ...\n"
"\n"
"A load generator of the rds-stress shape for AF_RDS. Both sides fork one\n"
"process per task (tasks=, the same on both sides); passive task i binds\n"
"PORT+i, active task i sends to peer PORT+i from its own socket (bind port 0\n"
"picks one; a given PORT gives PORT+i). Addresses are IPv4.\n"
"\n"
"Modes of the active side (the passive side follows whatever it is sent):\n"
"  mode=rr       requests of size= bytes, each answered by an ack of\n"
"                ack-size= bytes; depth= requests in flight per task;\n"
"                latency is request to ack (default)\n"
"  mode=oneway   messages of size= bytes, no answers, as fast as the socket\n"
"                takes them (retrying while the passive port is congested)\n"
"  rdma=write    RDMA WRITEs (rdma=read: READs) of rdma-size= bytes, RDS/IB\n"
"                only. The passive task registers depth= buffers once with\n"
"                RDS_CMSG_RDMA_MAP and sends their cookies; each operation\n"
"                carries a 32-byte payload (immediate data) in the same\n"
"                sendmsg, and every notify=-th one RDS_RDMA_NOTIFY_ME (the\n"
"                last one always). A completion notice for operation k\n"
"                completes every operation up to k (the notices themselves\n"
"                can arrive out of order); depth= operations are kept in\n"
"                flight; latency is issue to notice of the notified ones.\n"
"                verify=1 checks a stamp in the first 8 bytes of every\n"
"                transfer. fence=1 (the default for READs, as in rdscat)\n"
"                sets RDS_RDMA_FENCE, so the payload goes out only once the\n"
"                READ has completed: with fence=0 a READ's success notice\n"
"                was seen (6.12, rxe) before its data had landed, the\n"
"                peer's ack of the payload overtaking the READ response.\n"
"\n"
"Defaults: tasks=1 depth=1 size=1024 ack-size=32 rdma-size=4096 notify=1\n"
"warm=0 dur=5 timeout=30. Sizes take k or m suffixes (1024, 1 MiB at most;\n"
"size and ack-size at least 32, the header). Times are seconds.\n"
"\n"
"The measuring window opens warm= seconds after all active tasks have set\n"
"up and lasts dur=; messages sent in it are flagged, so the passive side\n"
"measures the same traffic. Afterwards each active task waits for what is\n"
"in flight, tells its passive task how many it sent and gets its count\n"
"back. The passive side exits when every task has finished (timeout=\n"
"bounds its silence once a task has said hello).\n"
"\n"
"Output: lines starting with '#' for people, and one line\n"
"  RESULT key=value...\n"
"per side at the end (all values numbers): msgs (sent, or received, in the\n"
"window), secs, rate (msgs/s), mb_s, lat_*_ns (active), cpu_user_s,\n"
"cpu_sys_s and cpu_ns_per_msg (getrusage of the tasks over the window),\n"
"machine_cpu_ns_per_msg (busy time of all CPUs from /proc/stat, active),\n"
"and the end-of-run accounting: sent, completed, peer_counted, counts_match;\n"
"for RDMA notified, notices, late_notices (notices that came after one for\n"
"a later operation), early_reads (with verify=1: unnotified READs whose data\n"
"was not there yet at the notice that completed them), failed, accounted\n"
"(every operation completed and every notice asked for arrived). The\n"
"passive side prints READY once bound.\n"
"Exit status: 0 if everything was accounted for, 1 on any error or\n"
"mismatch, 2 on bad usage.\n";

/* ---- wire format: a 32-byte header, native byte order ---- */

#define MAGIC 0x52445343u /* "RDSC" */
#define HDR 32

enum {
	T_HELLO = 1,   /* active -> passive: aux depth, aux2 rdma size, flags F_H_* */
	T_HELLO_ACK,   /* passive -> active (rr, oneway) */
	T_BUF,         /* passive -> active with RDS_CMSG_RDMA_DEST: aux slot */
	T_REQ,         /* request: aux ack size, ts echoed */
	T_ACK,         /* answer: seq, ts and flags of the request */
	T_DATA,        /* oneway message */
	T_IMM,         /* RDMA immediate data: seq op number, aux slot */
	T_FIN,         /* active is done: seq = messages/operations sent */
	T_FINACK,      /* seq counted, aux sequence errors, aux2 verify errors */
	T_REJECT,      /* passive refuses: reason text follows the header */
};

#define F_WINDOW 1   /* data: sent inside the measuring window */
#define F_H_WRITE 2  /* hello: RDMA WRITE */
#define F_H_READ 4   /* hello: RDMA READ */
#define F_H_VERIFY 8 /* hello: stamp and check transfers */

struct hdr {
	uint32_t magic;
	uint8_t type;
	uint8_t flags;
	uint16_t task;
	uint32_t aux;
	uint32_t aux2;
	uint64_t seq;
	int64_t ts;
};
_Static_assert(sizeof(struct hdr) == HDR, "header layout");

#define MAX_MSG (1u << 20)           /* RDS_MAX_MSG_SIZE */
#define RDMA_MEM_CAP (256u << 20)    /* registered or pinned memory per side */
#define READ_PATTERN 0x5244535245414421ull

/* ---- options ---- */

enum { M_RR, M_ONEWAY, M_WRITE, M_READ };
static const char *mode_names[] = {"rr", "oneway", "rdma-write", "rdma-read"};

struct opts {
	int active;
	struct sockaddr_in bind, peer;
	int have_bind, have_peer, bind_port;
	int mode;
	int tasks, depth, notify, verify, fence;
	size_t size, ack_size, rdma_size;
	double warm, dur, timeout;
	const char *netns;
};

static struct opts O;
static const char *who = "rdsstress-c";

_Noreturn static void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "rdsstress-c: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n(run rdsstress-c without arguments for the usage text)\n");
	va_end(ap);
	exit(2);
}

_Noreturn static void fail(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(buf, sizeof(buf), "%s: ", who);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(buf, "\n");
	fputs(buf, stderr); /* one write: tasks share stderr */
	exit(1);
}

_Noreturn static void fail_errno(const char *what)
{
	fail("%s: %s", what, strerror(errno));
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void parse_addr(const char *key, const char *s, struct sockaddr_in *sa, int need_port, int *have_port)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	if (n >= sizeof(host))
		usage_error("%s=%s: not an IPv4 address", key, s);
	memcpy(host, s, n);
	host[n] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		usage_error("%s=%s: not an IPv4 address (a.b.c.d:port)", key, s);
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);
		if (*end || p < 0 || p > 65535 || end == colon + 1)
			usage_error("%s=%s: bad port", key, s);
		sa->sin_port = htons((uint16_t)p);
	} else if (need_port) {
		usage_error("%s=%s: a port is required (a.b.c.d:port)", key, s);
	}
	if (have_port)
		*have_port = colon != NULL && sa->sin_port != 0;
}

static size_t parse_size(const char *key, const char *v)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v)
		usage_error("%s=%s: not a size", key, v);
	if (*end == 'k' || *end == 'K')
		x *= 1024, end++;
	else if (*end == 'm' || *end == 'M')
		x *= 1024 * 1024, end++;
	if (*end || x < 0 || x > 1 << 30 || x != (double)(uint64_t)x)
		usage_error("%s=%s: not a size", key, v);
	return (size_t)x;
}

static long parse_int(const char *key, const char *v)
{
	char *end;
	long x = strtol(v, &end, 10);
	if (*end || end == v)
		usage_error("%s=%s: not a number", key, v);
	return x;
}

static double parse_secs(const char *key, const char *v)
{
	char *end;
	double x = strtod(v, &end);
	if (*end || end == v || !(x >= 0))
		usage_error("%s=%s: want seconds", key, v);
	return x;
}

static void parse_opts(int argc, char **argv)
{
	int active = O.active;
	memset(&O, 0, sizeof(O));
	O.active = active;
	O.mode = M_RR;
	O.tasks = 1;
	O.depth = 1;
	O.notify = 1;
	O.size = 1024;
	O.ack_size = HDR;
	O.rdma_size = 4096;
	O.dur = 5;
	O.timeout = 30;
	int set_mode = 0, set_rdma = 0, set_size = 0, set_rdma_size = 0, set_notify = 0, set_fence = 0;
	for (int i = 2; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq)
			usage_error("arguments are key=value, got %s", argv[i]);
		*eq = 0;
		const char *k = argv[i], *v = eq + 1;
		if (!strcmp(k, "bind")) {
			parse_addr(k, v, &O.bind, !O.active, &O.bind_port);
			O.have_bind = 1;
		} else if (!strcmp(k, "peer")) {
			parse_addr(k, v, &O.peer, 1, NULL);
			O.have_peer = 1;
		} else if (!strcmp(k, "mode")) {
			set_mode = 1;
			if (!strcmp(v, "rr"))
				O.mode = M_RR;
			else if (!strcmp(v, "oneway"))
				O.mode = M_ONEWAY;
			else
				usage_error("mode=%s: want rr or oneway (rdma=write|read for RDMA)", v);
		} else if (!strcmp(k, "rdma")) {
			set_rdma = 1;
			if (!strcmp(v, "write"))
				O.mode = M_WRITE;
			else if (!strcmp(v, "read"))
				O.mode = M_READ;
			else
				usage_error("rdma=%s: want write or read", v);
		} else if (!strcmp(k, "tasks")) {
			O.tasks = (int)parse_int(k, v);
		} else if (!strcmp(k, "depth")) {
			O.depth = (int)parse_int(k, v);
		} else if (!strcmp(k, "notify")) {
			O.notify = (int)parse_int(k, v);
			set_notify = 1;
		} else if (!strcmp(k, "verify")) {
			O.verify = (int)parse_int(k, v) != 0;
		} else if (!strcmp(k, "fence")) {
			O.fence = (int)parse_int(k, v) != 0;
			set_fence = 1;
		} else if (!strcmp(k, "size")) {
			O.size = parse_size(k, v);
			set_size = 1;
		} else if (!strcmp(k, "ack-size")) {
			O.ack_size = parse_size(k, v);
		} else if (!strcmp(k, "rdma-size")) {
			O.rdma_size = parse_size(k, v);
			set_rdma_size = 1;
		} else if (!strcmp(k, "warm")) {
			O.warm = parse_secs(k, v);
		} else if (!strcmp(k, "dur")) {
			O.dur = parse_secs(k, v);
		} else if (!strcmp(k, "timeout")) {
			O.timeout = parse_secs(k, v);
		} else if (!strcmp(k, "netns")) {
			O.netns = v;
		} else {
			usage_error("unknown argument %s", k);
		}
	}
	if (!O.have_bind)
		usage_error("bind= is required");
	if (O.tasks < 1 || O.tasks > 1024)
		usage_error("tasks=%d: want 1 to 1024", O.tasks);
	if (O.timeout <= 0)
		usage_error("timeout= must be positive");
	if (O.size < HDR || O.size > MAX_MSG || O.ack_size < HDR || O.ack_size > MAX_MSG)
		usage_error("size= and ack-size= must be %d bytes (the header) to 1 MiB", HDR);
	if (!O.active) {
		if (O.have_peer)
			usage_error("the passive side takes no peer=: it answers whoever says hello");
		if (ntohs(O.bind.sin_port) + O.tasks - 1 > 65535)
			usage_error("bind port + tasks - 1 exceeds 65535");
		return;
	}
	if (!O.have_peer)
		usage_error("peer= is required on the active side");
	if (ntohs(O.peer.sin_port) + O.tasks - 1 > 65535 || (O.bind_port && ntohs(O.bind.sin_port) + O.tasks - 1 > 65535))
		usage_error("port + tasks - 1 exceeds 65535");
	if (O.depth < 1 || O.depth > 4096)
		usage_error("depth=%d: want 1 to 4096", O.depth);
	if (O.dur <= 0)
		usage_error("dur= must be positive");
	if (set_rdma && set_mode)
		usage_error("rdma= replaces mode=: give one of them");
	if (O.mode >= M_WRITE) {
		size_t stride = (O.rdma_size + 4095) & ~(size_t)4095;
		if (set_size)
			usage_error("size= is for mode=rr and oneway; the RDMA transfer size is rdma-size=");
		if (O.rdma_size < 1 || O.rdma_size > MAX_MSG)
			usage_error("rdma-size=%zu: want 1 to 1 MiB", O.rdma_size);
		if (O.verify && O.rdma_size < 8)
			usage_error("verify=1 needs rdma-size= of at least 8 bytes (the stamp)");
		if (O.notify < 1 || O.notify > O.depth)
			usage_error("notify=%d: want 1 to depth (%d), so that a notified operation is always in flight", O.notify, O.depth);
		if ((uint64_t)O.tasks * (uint64_t)O.depth * stride > RDMA_MEM_CAP)
			usage_error("tasks x depth x rdma-size needs %llu MiB of registered memory per side; the limit is %u MiB",
				    (unsigned long long)((uint64_t)O.tasks * (uint64_t)O.depth * stride >> 20), RDMA_MEM_CAP >> 20);
		if (!set_fence)
			O.fence = O.mode == M_READ;
	} else if (set_rdma_size || set_notify || O.verify || set_fence) {
		usage_error("rdma-size=, notify=, verify= and fence= need rdma=write or rdma=read");
	}
}

/* ---- latency histogram: log-linear, under 1% error ---- */

#define HIST_P 7
#define HIST_MAXBITS 44 /* values are clamped below 2^44 ns (about 4.9 hours) */
#define HIST_BUCKETS ((HIST_MAXBITS - HIST_P + 1) << HIST_P)

struct hist {
	uint64_t n, min, max;
	double sum;
	int highest;
	uint64_t counts[HIST_BUCKETS];
};

static int hist_index(uint64_t v)
{
	if (v < (1u << HIST_P))
		return (int)v;
	int shift = 63 - __builtin_clzll(v) - HIST_P;
	uint64_t sub = (v >> shift) - (1u << HIST_P);
	return ((shift + 1) << HIST_P) + (int)sub;
}

static uint64_t hist_bucket_high(int i)
{
	if (i < (1 << HIST_P))
		return (uint64_t)i;
	int shift = (i >> HIST_P) - 1;
	uint64_t sub = (uint64_t)i & ((1u << HIST_P) - 1);
	uint64_t lo = ((1u << HIST_P) + sub) << shift;
	return lo + ((1ull << shift) - 1);
}

static void hist_record(struct hist *h, uint64_t v)
{
	if (v >= 1ull << HIST_MAXBITS)
		v = (1ull << HIST_MAXBITS) - 1;
	int i = hist_index(v);
	h->counts[i]++;
	if (i > h->highest)
		h->highest = i;
	if (h->n == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->n++;
	h->sum += (double)v;
}

static void hist_merge(struct hist *dst, const struct hist *src)
{
	if (src->n == 0)
		return;
	for (int i = 0; i <= src->highest; i++)
		dst->counts[i] += src->counts[i];
	if (src->highest > dst->highest)
		dst->highest = src->highest;
	if (dst->n == 0 || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->n += src->n;
	dst->sum += src->sum;
}

/* hist_quantile returns the highest value of the bucket holding the q-th
 * sample, clamped to the largest value recorded: never below the exact
 * sample quantile and less than 1% above it. */
static uint64_t hist_quantile(const struct hist *h, double q)
{
	if (h->n == 0)
		return 0;
	double want = q * (double)h->n;
	uint64_t rank = (uint64_t)want;
	if ((double)rank < want)
		rank++;
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (int i = 0; i <= h->highest; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			uint64_t v = hist_bucket_high(i);
			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

/* ---- per-task results, in memory shared with the parent ---- */

struct task_res {
	/* both sides */
	uint64_t win_msgs, win_bytes;   /* sent (active) or received (passive) in the window */
	int64_t win_open, win_close;    /* CLOCK_MONOTONIC ns; 0 if never opened */
	double cpu_user, cpu_sys;       /* getrusage over the window */
	uint64_t seq_errors, verify_errors;
	/* active */
	uint64_t sent, completed, congested, notified, notices, late_notices, early_reads, failed;
	uint64_t peer_counted;
	struct hist lat;
	/* passive */
	uint64_t received, acks, foreign, registrations, finished;
};

static struct task_res *results;

/* ---- sockets ---- */

static int rds_socket(int rcvbuf, int sndbuf, int nonblock)
{
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	if (fd < 0)
		fail_errno("socket(AF_RDS) (is the rds module loaded?)");
	int force = geteuid() == 0;
	if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, force ? SO_SNDBUFFORCE : SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
		fail_errno("setsockopt(SO_SNDBUF)");
	if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, force ? SO_RCVBUFFORCE : SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0)
		fail_errno("setsockopt(SO_RCVBUF)");
	if (nonblock && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		fail_errno("fcntl(O_NONBLOCK)");
	return fd;
}

static void bind_at(int fd, const struct sockaddr_in *sa)
{
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0) {
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
		fail("bind %s:%u: %s", a, ntohs(sa->sin_port), strerror(errno));
	}
}

static void enter_netns(void)
{
	if (!O.netns)
		return;
	int nfd = open(O.netns, O_RDONLY | O_CLOEXEC);
	if (nfd < 0)
		fail_errno(O.netns);
	if (setns(nfd, CLONE_NEWNET) < 0)
		fail_errno("setns");
	close(nfd);
}

static int buffer_for(size_t n)
{
	return n <= 64 << 10 ? 0 : (int)(n + (64 << 10));
}

static void put_hdr(void *buf, uint8_t type, uint8_t flags, uint16_t task, uint32_t aux, uint32_t aux2, uint64_t seq, int64_t ts)
{
	struct hdr h = {.magic = MAGIC, .type = type, .flags = flags, .task = task, .aux = aux, .aux2 = aux2, .seq = seq, .ts = ts};
	memcpy(buf, &h, sizeof(h));
}

static int get_hdr(const void *buf, ssize_t n, struct hdr *h)
{
	if (n < HDR)
		return 0;
	memcpy(h, buf, sizeof(*h));
	return h->magic == MAGIC;
}

static int same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* send_now sends one message and returns 0, or -1 with errno EAGAIN (send
 * buffer full) or ENOBUFS (destination port congested); anything else is
 * fatal. */
static int send_now(int fd, struct msghdr *m, const char *what)
{
	for (;;) {
		if (sendmsg(fd, m, MSG_DONTWAIT) >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == ENOBUFS)
			return -1;
		fail_errno(what);
	}
}

/* send_wait sends one message, waiting while the socket is full or the
 * port congested, for up to timeout seconds (setup and end of run only). */
static void send_wait(int fd, struct msghdr *m, const char *what)
{
	int64_t deadline = now_ns() + (int64_t)(O.timeout * 1e9);
	int backoff_us = 50;
	while (send_now(fd, m, what) < 0) {
		if (now_ns() > deadline)
			fail("%s: still %s after %.0f s", what, errno == ENOBUFS ? "congested" : "blocked", O.timeout);
		struct pollfd p = {.fd = fd, .events = errno == EAGAIN ? POLLOUT : 0};
		struct timespec ts = {0, backoff_us * 1000L};
		ppoll(&p, 1, &ts, NULL);
		if (backoff_us < 5000)
			backoff_us *= 2;
	}
}

static void send_hdr(int fd, const struct sockaddr_in *to, void *buf, size_t len, const char *what)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr m = {.msg_name = (void *)to, .msg_namelen = sizeof(*to), .msg_iov = &iov, .msg_iovlen = 1};
	send_wait(fd, &m, what);
}

/* drain_sent waits until the kernel holds no message from (fd's) local
 * address and port in its send or retransmit queue: closing an RDS socket
 * discards what is still queued. */
static void drain_sent(int fd, const struct sockaddr_in *local)
{
	static char *buf;
	static socklen_t cap;
	int64_t deadline = now_ns() + (int64_t)(O.timeout * 1e9);
	int opts[2] = {RDS_INFO_SEND_MESSAGES, RDS_INFO_RETRANS_MESSAGES};
	for (;;) {
		int pending = 0;
		for (int t = 0; t < 2; t++) {
			for (;;) {
				socklen_t len = cap;
				int item = getsockopt(fd, SOL_RDS, opts[t], buf, &len);
				if (item < 0 && errno == ENOSPC) {
					if (len > 64u << 20)
						fail("RDS info table of %u bytes", len);
					free(buf);
					cap = len + 4096;
					buf = malloc(cap);
					if (!buf)
						fail_errno("malloc");
					continue;
				}
				if (item < 0)
					fail_errno("getsockopt(RDS_INFO_*_MESSAGES)");
				for (socklen_t off = 0; item > 0 && off + (socklen_t)item <= len; off += (socklen_t)item) {
					struct rds_info_message im;
					memset(&im, 0, sizeof(im));
					memcpy(&im, buf + off, (size_t)item < sizeof(im) ? (size_t)item : sizeof(im));
					if (im.laddr == local->sin_addr.s_addr && im.lport == local->sin_port)
						pending++;
				}
				break;
			}
		}
		if (pending == 0)
			return;
		if (now_ns() > deadline)
			fail("%d messages still unacknowledged by the peer after %.0f s", pending, O.timeout);
		usleep(2000);
	}
}

/* ---- CPU accounting ---- */

static void rusage_secs(double *user, double *sys)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		fail_errno("getrusage");
	*user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
	*sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* window is the measuring window of one task, as seen by its own CPU time. */
struct window {
	int open, closed;
	double u0, s0;
};

static void window_open(struct window *w, struct task_res *r, int64_t t)
{
	w->open = 1;
	r->win_open = t;
	rusage_secs(&w->u0, &w->s0);
}

static void window_close(struct window *w, struct task_res *r, int64_t t)
{
	double u, s;
	if (!w->open || w->closed)
		return;
	w->closed = 1;
	r->win_close = t;
	rusage_secs(&u, &s);
	r->cpu_user = u - w->u0;
	r->cpu_sys = s - w->s0;
}

/* machine_busy returns the busy time of all CPUs so far, in seconds, from
 * /proc/stat (everything but idle and iowait), or -1. */
static double machine_busy(void)
{
	char buf[512];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long v[8] = {0};
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 8)
		return -1;
	unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

/* ---- the passive side ---- */

struct passive {
	int fd, task;
	struct sockaddr_in local, peer;
	int have_peer;
	char *buf;
	struct task_res *r;
	struct window w;
	uint64_t next_seq;
	/* RDMA */
	int rdma_op; /* 0, M_WRITE or M_READ */
	int verify;
	uint32_t depth;
	size_t rdma_size, stride;
	char *region;
	uint64_t *cookies;
	/* an answer that could not be sent yet */
	int pending;
	size_t pending_len;
	char *ack;
	int backoff_us;
	int64_t retry_at;
};

static void passive_reject(struct passive *p, const struct sockaddr_in *to, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	put_hdr(msg, T_REJECT, 0, (uint16_t)p->task, 0, 0, 0, 0);
	int n = vsnprintf(msg + HDR, sizeof(msg) - HDR, fmt, ap);
	va_end(ap);
	size_t len = HDR + (n < 0 ? 0 : n >= (int)(sizeof(msg) - HDR) ? sizeof(msg) - HDR - 1 : (size_t)n);
	send_hdr(p->fd, to, msg, len, "sendmsg(reject)");
	drain_sent(p->fd, &p->local);
	fail("refused the active side: %s", msg + HDR);
}

/* passive_rdma registers depth buffers of rdma_size bytes, one
 * RDS_CMSG_RDMA_MAP message per buffer carrying its slot number. */
static void passive_rdma(struct passive *p, const struct hdr *h, const struct sockaddr_in *from)
{
	p->rdma_op = h->flags & F_H_WRITE ? M_WRITE : M_READ;
	p->verify = (h->flags & F_H_VERIFY) != 0;
	p->depth = h->aux;
	p->rdma_size = h->aux2;
	p->stride = (p->rdma_size + 4095) & ~(size_t)4095;
	if (p->depth < 1 || p->depth > 4096 || p->rdma_size < 1 || p->rdma_size > MAX_MSG ||
	    (uint64_t)p->depth * p->stride > RDMA_MEM_CAP)
		passive_reject(p, from, "RDMA hello with depth %u and size %zu: want depth 1 to 4096, size 1 to 1 MiB, at most %u MiB",
			       p->depth, p->rdma_size, RDMA_MEM_CAP >> 20);
	p->region = mmap(NULL, p->depth * p->stride, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p->region == MAP_FAILED)
		fail_errno("mmap (RDMA buffers)");
	p->cookies = calloc(p->depth, sizeof(uint64_t));
	if (!p->cookies)
		fail_errno("calloc");
	for (uint32_t s = 0; s < p->depth; s++) {
		char *b = p->region + (size_t)s * p->stride;
		if (p->rdma_op == M_READ && p->verify) {
			uint64_t stamp = READ_PATTERN ^ s;
			memcpy(b, &stamp, sizeof(stamp));
		}
		struct rds_get_mr_args args = {
			.vec = {.addr = (uint64_t)(uintptr_t)b, .bytes = p->rdma_size},
			.cookie_addr = (uint64_t)(uintptr_t)&p->cookies[s],
			.flags = p->rdma_op == M_WRITE ? RDS_RDMA_READWRITE : 0,
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
		char msg[HDR];
		put_hdr(msg, T_BUF, 0, (uint16_t)p->task, s, p->depth, 0, 0);
		struct iovec iov = {.iov_base = msg, .iov_len = HDR};
		struct msghdr m = {.msg_name = (void *)from, .msg_namelen = sizeof(*from), .msg_iov = &iov, .msg_iovlen = 1,
				   .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
		/* The first RDMA_MAP on a connection still coming up can fail
		 * with EAGAIN; send_wait retries it. Any other error (for
		 * example EOPNOTSUPP on RDS/TCP) is fatal. */
		for (;;) {
			if (sendmsg(p->fd, &m, MSG_DONTWAIT) >= 0)
				break;
			if (errno == EOPNOTSUPP || errno == ENODEV || errno == EINVAL)
				passive_reject(p, from, "RDS_CMSG_RDMA_MAP failed: %s (RDMA needs RDS/IB addresses)", strerror(errno));
			if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
				fail_errno("sendmsg(RDS_CMSG_RDMA_MAP)");
			send_wait(p->fd, &m, "sendmsg(RDS_CMSG_RDMA_MAP)");
			break;
		}
		p->r->registrations++;
	}
}

/* passive_queue sends an answer now or keeps it pending. */
static void passive_queue(struct passive *p, size_t len)
{
	struct iovec iov = {.iov_base = p->ack, .iov_len = len};
	struct msghdr m = {.msg_name = &p->peer, .msg_namelen = sizeof(p->peer), .msg_iov = &iov, .msg_iovlen = 1};
	if (send_now(p->fd, &m, "sendmsg(answer)") == 0) {
		p->backoff_us = 50;
		return;
	}
	p->pending = errno == EAGAIN ? 1 : 2; /* 1: wait for POLLOUT, 2: congested, back off */
	p->pending_len = len;
	if (p->pending == 2) {
		p->retry_at = now_ns() + p->backoff_us * 1000LL;
		if (p->backoff_us < 5000)
			p->backoff_us *= 2;
	}
}

/* passive_message handles one received message; it returns 1 once the
 * task is finished. */
static int passive_message(struct passive *p, ssize_t n, const struct sockaddr_in *from, int64_t t)
{
	struct hdr h;
	struct task_res *r = p->r;
	if (!get_hdr(p->buf, n, &h) || (p->have_peer && !same_addr(from, &p->peer))) {
		r->foreign++;
		return 0;
	}
	if (h.type == T_HELLO) {
		if (p->have_peer)
			return 0; /* a retry crossed our answer */
		p->peer = *from;
		p->have_peer = 1;
		if (h.flags & (F_H_WRITE | F_H_READ)) {
			passive_rdma(p, &h, from);
			return 0;
		}
		put_hdr(p->ack, T_HELLO_ACK, 0, h.task, 0, 0, 0, 0);
		passive_queue(p, HDR);
		return 0;
	}
	if (!p->have_peer) {
		r->foreign++;
		return 0;
	}
	switch (h.type) {
	case T_REQ:
	case T_DATA:
	case T_IMM:
		if (h.seq != p->next_seq)
			r->seq_errors++;
		p->next_seq = h.seq + 1;
		r->received++;
		if (h.flags & F_WINDOW) {
			if (!p->w.open)
				window_open(&p->w, r, t);
			r->win_msgs++;
			r->win_bytes += h.type == T_IMM ? p->rdma_size : (uint64_t)n;
		} else if (p->w.open) {
			window_close(&p->w, r, t);
		}
		if (h.type == T_IMM) {
			if (!p->rdma_op || h.aux >= p->depth) {
				r->foreign++;
				break;
			}
			if (p->verify && p->rdma_op == M_WRITE) {
				/* The WRITE lands before its immediate data; a later
				 * WRITE into the same slot may already have too. */
				uint64_t v;
				memcpy(&v, p->region + (size_t)h.aux * p->stride, sizeof(v));
				if (v < h.seq || (v - h.seq) % p->depth != 0)
					r->verify_errors++;
			}
		} else if (h.type == T_REQ) {
			size_t len = h.aux < HDR ? HDR : h.aux > MAX_MSG ? MAX_MSG : h.aux;
			put_hdr(p->ack, T_ACK, h.flags, h.task, 0, 0, h.seq, h.ts);
			passive_queue(p, len);
			r->acks++;
		}
		break;
	case T_FIN:
		window_close(&p->w, r, t);
		put_hdr(p->ack, T_FINACK, 0, h.task, (uint32_t)(r->seq_errors > UINT32_MAX ? UINT32_MAX : r->seq_errors),
			(uint32_t)(r->verify_errors > UINT32_MAX ? UINT32_MAX : r->verify_errors), r->received, 0);
		if (p->pending)
			fail("FIN arrived while an answer was still pending");
		send_hdr(p->fd, &p->peer, p->ack, HDR, "sendmsg(count)");
		drain_sent(p->fd, &p->local);
		r->finished = 1;
		return 1;
	default:
		r->foreign++;
	}
	return 0;
}

_Noreturn static void passive_task(int task, int ready_fd)
{
	struct passive p;
	memset(&p, 0, sizeof(p));
	p.task = task;
	p.r = &results[task];
	p.r->lat.highest = -1;
	p.backoff_us = 50;
	size_t big = O.size > O.ack_size ? O.size : O.ack_size;
	int rcv = (int)(4 * big > (1u << 20) ? 4 * big : (1u << 20));
	p.fd = rds_socket(rcv, buffer_for(big), 1);
	p.local = O.bind;
	p.local.sin_port = htons((uint16_t)(ntohs(O.bind.sin_port) + task));
	bind_at(p.fd, &p.local);
	p.buf = malloc(MAX_MSG + 1);
	p.ack = calloc(1, MAX_MSG);
	if (!p.buf || !p.ack)
		fail_errno("malloc");
	char c = 'r';
	if (write(ready_fd, &c, 1) != 1)
		fail_errno("write(ready)");
	close(ready_fd);

	char ctl[256];
	int64_t last = 0; /* last message from the peer; silence bound once it said hello */
	for (;;) {
		int64_t t = now_ns();
		if (p.have_peer && last && t - last > (int64_t)(O.timeout * 1e9))
			fail("no message from the active side for %.0f s", O.timeout);
		struct pollfd pf = {.fd = p.fd, .events = POLLIN};
		struct timespec ts = {1, 0}, *tsp = p.have_peer ? &ts : NULL;
		if (p.pending == 1) {
			pf.events = POLLOUT;
		} else if (p.pending == 2) {
			int64_t wait = p.retry_at - t;
			ts.tv_sec = 0;
			ts.tv_nsec = wait > 0 ? wait : 0;
			tsp = &ts;
		}
		if (p.pending != 2 || ts.tv_nsec > 0) {
			int k = ppoll(&pf, 1, tsp, NULL);
			if (k < 0 && errno != EINTR)
				fail_errno("poll");
		}
		if (p.pending) {
			if (p.pending == 2 && now_ns() < p.retry_at)
				continue;
			p.pending = 0;
			passive_queue(&p, p.pending_len);
			if (p.pending)
				continue;
		}
		while (!p.pending) {
			struct sockaddr_in from;
			struct iovec iov = {.iov_base = p.buf, .iov_len = MAX_MSG + 1};
			struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
					   .msg_control = ctl, .msg_controllen = sizeof(ctl)};
			ssize_t n = recvmsg(p.fd, &m, MSG_DONTWAIT);
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				fail_errno("recvmsg");
			}
			if (m.msg_namelen == 0)
				continue; /* a notice carrying control data only */
			if (m.msg_flags & MSG_TRUNC) {
				p.r->foreign++;
				continue;
			}
			last = now_ns();
			if (passive_message(&p, n, &from, last))
				exit(0);
		}
	}
}

/* ---- the active side ---- */

struct active {
	int fd, task;
	struct sockaddr_in peer;
	struct task_res *r;
	struct window w;
	int64_t t_open, t_close;
	char *msg;
	char *rbuf;
	size_t rbuf_len;
	char *rctl;
	size_t rctl_len;
	/* RDMA */
	char *local;
	size_t stride;
	struct rds_iovec *lvec;
	uint64_t *cookies;
	int64_t *issued_at;      /* per slot: issue time of a notified operation in the window */
	uint64_t *slot_token;    /* per slot: the operation using it, 0 if none yet */
	char *slot_await;        /* per slot: its operation's notice has not arrived */
	char *slot_notified;     /* per slot: its operation asked for a notice */
	uint64_t through;        /* every operation with token <= through has completed */
	uint64_t awaiting;       /* notices still due */
	uint64_t last_notified;  /* token of the last operation issued with NOTIFY_ME */
	uint64_t have_bufs;
};

static int rdma_mode(void) { return O.mode == M_WRITE || O.mode == M_READ; }

/* read_landed reports whether the local slot holds the stamp of the
 * passive buffer a READ copies (slots are zeroed before each READ). */
static int read_landed(const struct active *a, uint64_t slot)
{
	uint64_t v;
	memcpy(&v, a->local + slot * a->stride, sizeof(v));
	return v == (READ_PATTERN ^ slot);
}

/* active_recv reads everything queued; it returns the number of messages
 * (and notices) handled. */
static int active_recv(struct active *a, int setup)
{
	int handled = 0;
	struct task_res *r = a->r;
	for (;;) {
		struct sockaddr_in from;
		struct iovec iov = {.iov_base = a->rbuf, .iov_len = a->rbuf_len};
		struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
				   .msg_control = a->rctl, .msg_controllen = a->rctl_len};
		ssize_t n = recvmsg(a->fd, &m, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return handled;
			fail_errno("recvmsg");
		}
		handled++;
		int64_t t = now_ns();
		uint64_t dest = 0;
		int have_dest = 0;
		if (m.msg_flags & MSG_CTRUNC)
			fail("control data truncated (%zu bytes of room)", a->rctl_len);
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_RDS)
				continue;
			if (c->cmsg_type == RDS_CMSG_RDMA_DEST && c->cmsg_len >= CMSG_LEN(sizeof(dest))) {
				memcpy(&dest, CMSG_DATA(c), sizeof(dest));
				have_dest = 1;
			} else if (c->cmsg_type == RDS_CMSG_RDMA_STATUS && c->cmsg_len >= CMSG_LEN(sizeof(struct rds_rdma_notify))) {
				struct rds_rdma_notify nt;
				memcpy(&nt, CMSG_DATA(c), sizeof(nt));
				r->notices++;
				if (nt.status != RDS_RDMA_SUCCESS) {
					r->failed++;
					fprintf(stderr, "%s: RDMA operation %llu failed with status %d\n", who,
						(unsigned long long)nt.user_token, nt.status);
				}
				uint64_t tok = nt.user_token, slot = (tok - 1) % (uint64_t)O.depth;
				if (tok == 0 || tok > r->sent || a->slot_token[slot] != tok ||
				    (!a->slot_await[slot] && nt.status == RDS_RDMA_SUCCESS))
					fail("unexpected completion notice for operation %llu (%llu issued)",
					     (unsigned long long)tok, (unsigned long long)r->sent);
				if (tok < a->through)
					r->late_notices++;
				if (a->slot_await[slot]) {
					a->slot_await[slot] = 0;
					a->awaiting--;
					if (O.verify && O.mode == M_READ && !read_landed(a, slot))
						r->verify_errors++;
				}
				if (a->issued_at[slot] > 0)
					hist_record(&r->lat, (uint64_t)(t - a->issued_at[slot]));
				a->issued_at[slot] = 0;
				/* The operations of one connection complete in order,
				 * so a notice for k completes every operation up to
				 * k; the notices themselves were seen to arrive out of
				 * order, so those of earlier notified operations may
				 * still be due. A READ's data is checked at its own
				 * notice; an unnotified READ's at the notice that
				 * completes it, where missing data only counts as
				 * early_reads (see the usage text). */
				for (; a->through < tok; a->through++) {
					uint64_t k = a->through + 1, s = (k - 1) % (uint64_t)O.depth;
					if (O.verify && O.mode == M_READ && k < tok && !a->slot_await[s] && !a->slot_notified[s] &&
					    !read_landed(a, s))
						r->early_reads++;
					r->completed++;
				}
			}
		}
		if (n == 0 || m.msg_namelen == 0)
			continue; /* notices only */
		struct hdr h;
		if (!get_hdr(a->rbuf, n, &h) || !same_addr(&from, &a->peer) || h.task != a->task)
			continue;
		switch (h.type) {
		case T_HELLO_ACK:
			if (setup)
				a->have_bufs = 1;
			break;
		case T_BUF:
			if (!have_dest || h.aux >= (uint32_t)O.depth || a->cookies[h.aux])
				fail("bad RDMA buffer announcement (slot %u)", h.aux);
			a->cookies[h.aux] = dest;
			a->have_bufs++;
			break;
		case T_REJECT:
			fail("the passive side refused: %.*s", (int)(n - HDR), a->rbuf + HDR);
		case T_ACK:
			if (h.flags & F_WINDOW)
				hist_record(&r->lat, (uint64_t)(t - h.ts));
			r->completed++;
			break;
		case T_FINACK:
			r->peer_counted = h.seq;
			r->seq_errors += h.aux;
			r->verify_errors += h.aux2;
			r->finished = 1;
			break;
		}
	}
}

/* active_setup says hello until the passive task answers (with its RDMA
 * buffers in RDMA mode). */
static void active_setup(struct active *a)
{
	char hello[HDR];
	uint8_t flags = O.mode == M_WRITE ? F_H_WRITE : O.mode == M_READ ? F_H_READ : 0;
	if (O.verify)
		flags |= F_H_VERIFY;
	put_hdr(hello, T_HELLO, flags, (uint16_t)a->task, (uint32_t)O.depth, (uint32_t)O.rdma_size, 0, 0);
	uint64_t want = rdma_mode() ? (uint64_t)O.depth : 1;
	int64_t deadline = now_ns() + (int64_t)(O.timeout * 1e9);
	int64_t next_hello = 0;
	while (a->have_bufs < want) {
		int64_t t = now_ns();
		if (t > deadline)
			fail("no answer from the passive side within %.0f s (%llu of %llu buffers announced)", O.timeout,
			     (unsigned long long)a->have_bufs, (unsigned long long)want);
		/* Repeat the hello while nothing came back: a message to a port
		 * nobody has bound yet is dropped. */
		if (a->have_bufs == 0 && t >= next_hello) {
			send_hdr(a->fd, &a->peer, hello, HDR, "sendmsg(hello)");
			next_hello = t + 500000000;
		}
		struct pollfd pf = {.fd = a->fd, .events = POLLIN};
		poll(&pf, 1, 100);
		active_recv(a, 1);
	}
}

/* outstanding returns what is still in flight: requests without an ack,
 * or RDMA operations not yet complete plus notices still due. */
static uint64_t outstanding(const struct active *a)
{
	if (rdma_mode())
		return a->r->sent - a->through + a->awaiting;
	return O.mode == M_RR ? a->r->sent - a->r->completed : 0;
}

/* can_issue reports whether the window has room for one more: depth
 * requests in flight, or for RDMA a free slot (its last operation
 * complete and its notice, if asked for, arrived). */
static int can_issue(const struct active *a)
{
	if (O.mode == M_ONEWAY)
		return 1;
	if (!rdma_mode())
		return a->r->sent - a->r->completed < (uint64_t)O.depth;
	uint64_t s = a->r->sent % (uint64_t)O.depth;
	return a->slot_token[s] == 0 || (a->slot_token[s] <= a->through && !a->slot_await[s]);
}

/* issue sends the next request, message or RDMA operation; it returns 0,
 * or -1 with errno EAGAIN or ENOBUFS. */
static int active_issue(struct active *a, int64_t t, int in_window, int final)
{
	struct task_res *r = a->r;
	uint8_t flags = in_window ? F_WINDOW : 0;
	struct iovec iov = {.iov_base = a->msg};
	struct msghdr m = {.msg_name = &a->peer, .msg_namelen = sizeof(a->peer), .msg_iov = &iov, .msg_iovlen = 1};
	union {
		char buf[CMSG_SPACE(sizeof(struct rds_rdma_args))];
		struct cmsghdr align;
	} ctl;
	if (!rdma_mode()) {
		put_hdr(a->msg, O.mode == M_RR ? T_REQ : T_DATA, flags, (uint16_t)a->task, (uint32_t)O.ack_size, 0, r->sent, t);
		iov.iov_len = O.size;
		if (send_now(a->fd, &m, "sendmsg") < 0)
			return -1;
		r->sent++;
		if (in_window) {
			r->win_msgs++;
			r->win_bytes += O.size;
		}
		return 0;
	}
	uint64_t token = r->sent + 1;
	uint32_t slot = (uint32_t)(r->sent % (uint64_t)O.depth);
	int notify = token % (uint64_t)O.notify == 0 || final;
	struct rds_rdma_args args = {
		.cookie = a->cookies[slot],
		.remote_vec = {.addr = 0, .bytes = O.rdma_size},
		.local_vec_addr = (uint64_t)(uintptr_t)&a->lvec[slot],
		.nr_local = 1,
		.flags = (O.mode == M_WRITE ? RDS_RDMA_READWRITE : 0) | (notify ? RDS_RDMA_NOTIFY_ME : 0) |
			 (O.fence ? RDS_RDMA_FENCE : 0),
		.user_token = token,
	};
	if (O.verify) {
		uint64_t v = O.mode == M_WRITE ? r->sent : 0;
		memcpy(a->local + slot * a->stride, &v, sizeof(v));
	}
	memset(&ctl, 0, sizeof(ctl));
	struct cmsghdr *c = (struct cmsghdr *)ctl.buf;
	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RDS_CMSG_RDMA_ARGS;
	c->cmsg_len = CMSG_LEN(sizeof(args));
	memcpy(CMSG_DATA(c), &args, sizeof(args));
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	put_hdr(a->msg, T_IMM, flags, (uint16_t)a->task, slot, 0, r->sent, t);
	iov.iov_len = HDR;
	if (send_now(a->fd, &m, "sendmsg(RDS_CMSG_RDMA_ARGS)") < 0)
		return -1;
	a->issued_at[slot] = notify && in_window ? t : 0;
	a->slot_token[slot] = token;
	a->slot_await[slot] = (char)notify;
	a->slot_notified[slot] = (char)notify;
	r->sent++;
	if (notify) {
		r->notified++;
		a->awaiting++;
		a->last_notified = token;
	}
	if (in_window) {
		r->win_msgs++;
		r->win_bytes += O.rdma_size;
	}
	return 0;
}

_Noreturn static void active_task(int task, int ready_fd, int go_fd, const int64_t *t0)
{
	struct active a;
	memset(&a, 0, sizeof(a));
	a.task = task;
	a.r = &results[task];
	a.r->lat.highest = -1;
	struct task_res *r = a.r;
	a.peer = O.peer;
	a.peer.sin_port = htons((uint16_t)(ntohs(O.peer.sin_port) + task));
	int rdma = rdma_mode();
	size_t sz = rdma ? HDR : O.size;
	long snd = (long)2 * O.depth * (long)sz;
	if (snd < buffer_for(sz))
		snd = buffer_for(sz);
	if (snd <= 212992)
		snd = 0; /* the default will do */
	if (snd > 64L << 20)
		snd = 64L << 20;
	a.fd = rds_socket(O.ack_size > 64 << 10 ? (int)(4 * O.ack_size) : 0, (int)snd, 1);
	if (rdma) {
		/* Failed operations are reported even without NOTIFY_ME. */
		int one = 1;
		if (setsockopt(a.fd, SOL_RDS, RDS_RECVERR, &one, sizeof(one)) < 0)
			fail_errno("setsockopt(RDS_RECVERR)");
	}
	struct sockaddr_in local = O.bind;
	if (O.bind_port)
		local.sin_port = htons((uint16_t)(ntohs(O.bind.sin_port) + task));
	bind_at(a.fd, &local);
	a.msg = calloc(1, sz);
	a.rbuf_len = 64 << 10;
	if (O.mode == M_RR && O.ack_size + 1 > a.rbuf_len)
		a.rbuf_len = O.ack_size + 1;
	a.rbuf = malloc(a.rbuf_len);
	a.rctl_len = 256 + (rdma ? CMSG_SPACE(sizeof(struct rds_rdma_notify)) * (size_t)O.depth : 0);
	a.rctl = malloc(a.rctl_len);
	if (!a.msg || !a.rbuf || !a.rctl)
		fail_errno("malloc");
	for (size_t i = HDR; i < sz; i++)
		a.msg[i] = (char)i;
	if (rdma) {
		a.stride = (O.rdma_size + 4095) & ~(size_t)4095;
		a.local = mmap(NULL, a.stride * O.depth, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (a.local == MAP_FAILED)
			fail_errno("mmap (local RDMA memory)");
		a.lvec = calloc(O.depth, sizeof(*a.lvec));
		a.cookies = calloc(O.depth, sizeof(uint64_t));
		a.issued_at = calloc(O.depth, sizeof(int64_t));
		a.slot_token = calloc(O.depth, sizeof(uint64_t));
		a.slot_await = calloc(O.depth, 1);
		a.slot_notified = calloc(O.depth, 1);
		if (!a.lvec || !a.cookies || !a.issued_at || !a.slot_token || !a.slot_await || !a.slot_notified)
			fail_errno("calloc");
		for (int s = 0; s < O.depth; s++) {
			a.lvec[s].addr = (uint64_t)(uintptr_t)(a.local + (size_t)s * a.stride);
			a.lvec[s].bytes = O.rdma_size;
		}
	}
	active_setup(&a);
	char c = 'r';
	if (write(ready_fd, &c, 1) != 1)
		fail_errno("write(ready)");
	close(ready_fd);
	while (read(go_fd, &c, 1) < 0 && errno == EINTR)
		;
	close(go_fd);
	a.t_open = *t0 + (int64_t)(O.warm * 1e9);
	a.t_close = a.t_open + (int64_t)(O.dur * 1e9);

	int blocked = 0; /* 1: send buffer full, wait for POLLOUT; 2: congested until retry_at */
	int64_t retry_at = 0;
	int backoff_us = 50;
	int stopping = 0;
	int64_t drain_deadline = 0;
	for (;;) {
		int64_t t = now_ns();
		if (!a.w.open && t >= a.t_open)
			window_open(&a.w, r, t);
		if (!stopping && t >= a.t_close) {
			window_close(&a.w, r, t);
			stopping = 1;
			drain_deadline = t + (int64_t)(O.timeout * 1e9);
		}
		int final = stopping && rdma && a.last_notified != r->sent;
		if (stopping && !final && outstanding(&a) == 0)
			break;
		if (stopping && t > drain_deadline)
			fail("%llu %s still outstanding %.0f s after the run", (unsigned long long)outstanding(&a),
			     rdma ? "RDMA operations" : "requests", O.timeout);
		if (blocked == 2 && t >= retry_at)
			blocked = 0;
		/* Send while the window allows. */
		while ((!stopping || final) && !blocked && can_issue(&a)) {
			int in_window = a.w.open && !a.w.closed;
			if (active_issue(&a, t, in_window, final) < 0) {
				if (errno == ENOBUFS) {
					r->congested++;
					blocked = 2;
					retry_at = t + backoff_us * 1000LL;
					if (backoff_us < 5000)
						backoff_us *= 2;
				} else {
					blocked = 1;
				}
				break;
			}
			backoff_us = 50;
			if (final)
				break;
			if (O.mode == M_ONEWAY) {
				t = now_ns();
				if (t >= a.t_close || (!a.w.open && t >= a.t_open))
					break;
			}
		}
		final = stopping && rdma && a.last_notified != r->sent;
		if (stopping && !final && outstanding(&a) == 0)
			continue;
		/* Wait for answers, room or the next edge of the window. */
		struct pollfd pf = {.fd = a.fd, .events = POLLIN};
		int can_send = (!stopping || final) && can_issue(&a);
		if (blocked == 1 && can_send)
			pf.events |= POLLOUT;
		int64_t edge = !a.w.open ? a.t_open : !stopping ? a.t_close : drain_deadline;
		if (blocked == 2 && retry_at < edge)
			edge = retry_at;
		if (can_send && !blocked)
			edge = t; /* room to send: only look */
		int64_t wait = edge - now_ns();
		struct timespec ts = {wait > 0 ? wait / 1000000000 : 0, wait > 0 ? wait % 1000000000 : 0};
		int k = ppoll(&pf, 1, &ts, NULL);
		if (k < 0 && errno != EINTR)
			fail_errno("poll");
		if (k > 0 && (pf.revents & POLLOUT))
			blocked = 0;
		if (k > 0 && (pf.revents & POLLIN))
			active_recv(&a, 0);
	}
	if (r->failed)
		fail("%llu of %llu RDMA operations failed", (unsigned long long)r->failed, (unsigned long long)r->sent);

	/* Tell the passive task what was sent and get its count. */
	char fin[HDR];
	put_hdr(fin, T_FIN, 0, (uint16_t)task, 0, 0, r->sent, 0);
	send_hdr(a.fd, &a.peer, fin, HDR, "sendmsg(fin)");
	int64_t deadline = now_ns() + (int64_t)(O.timeout * 1e9);
	while (!r->finished) {
		if (now_ns() > deadline)
			fail("the passive side did not report its count within %.0f s", O.timeout);
		struct pollfd pf = {.fd = a.fd, .events = POLLIN};
		poll(&pf, 1, 100);
		active_recv(&a, 0);
	}
	exit(0);
}

/* ---- the parent: fork the tasks, collect their results ---- */

static pid_t *pids;

static void kill_tasks(void)
{
	for (int i = 0; i < O.tasks; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGKILL);
}

/* reap waits for a task; with block == 0 it only looks. It returns the
 * number of tasks reaped and fails if one failed. */
static int reap(int block)
{
	int n = 0;
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, block ? 0 : WNOHANG);
		if (pid <= 0)
			return n;
		int task = -1;
		for (int i = 0; i < O.tasks; i++)
			if (pids[i] == pid)
				task = i;
		if (task < 0)
			continue;
		pids[task] = 0;
		n++;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			kill_tasks();
			if (WIFSIGNALED(st))
				fail("task %d was killed by signal %d", task, WTERMSIG(st));
			fail("task %d failed (exit status %d)", task, WEXITSTATUS(st));
		}
		if (block)
			return n;
	}
}

static void fork_tasks(int *ready_rd, int *go_wr, const int64_t *t0)
{
	int rp[2], gp[2];
	if (pipe2(rp, O_CLOEXEC) < 0 || pipe2(gp, O_CLOEXEC) < 0)
		fail_errno("pipe");
	pid_t parent = getpid();
	fflush(stdout);
	for (int i = 0; i < O.tasks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			kill_tasks();
			fail_errno("fork");
		}
		if (pid == 0) {
			static char name[64];
			snprintf(name, sizeof(name), "rdsstress-c: %s task %d", O.active ? "active" : "passive", i);
			who = name;
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			close(rp[0]);
			close(gp[1]);
			if (O.active)
				active_task(i, rp[1], gp[0], t0);
			close(gp[0]);
			passive_task(i, rp[1]);
		}
		pids[i] = pid;
	}
	close(rp[1]);
	close(gp[0]);
	*ready_rd = rp[0];
	*go_wr = gp[1];
}

/* wait_ready waits until every task has written its ready byte. */
static void wait_ready(int fd)
{
	int ready = 0;
	while (ready < O.tasks) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int k = poll(&pf, 1, 200);
		if (k > 0) {
			char buf[64];
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n > 0)
				ready += (int)n;
			if (n == 0 && ready < O.tasks) {
				reap(0);
				fail("tasks exited before they were ready");
			}
		}
		reap(0);
	}
	close(fd);
}

static void sleep_until(int64_t t)
{
	struct timespec ts = {t / 1000000000, t % 1000000000};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

struct totals {
	struct task_res s;
	int64_t open, close;
	double cpu;
};

static void sum_results(struct totals *t, struct hist *lat)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < O.tasks; i++) {
		struct task_res *r = &results[i];
		t->s.win_msgs += r->win_msgs;
		t->s.win_bytes += r->win_bytes;
		t->s.cpu_user += r->cpu_user;
		t->s.cpu_sys += r->cpu_sys;
		t->s.seq_errors += r->seq_errors;
		t->s.verify_errors += r->verify_errors;
		t->s.sent += r->sent;
		t->s.completed += r->completed;
		t->s.congested += r->congested;
		t->s.notified += r->notified;
		t->s.notices += r->notices;
		t->s.late_notices += r->late_notices;
		t->s.early_reads += r->early_reads;
		t->s.failed += r->failed;
		t->s.peer_counted += r->peer_counted;
		t->s.received += r->received;
		t->s.acks += r->acks;
		t->s.foreign += r->foreign;
		t->s.registrations += r->registrations;
		t->s.finished += r->finished;
		if (r->win_open && (t->open == 0 || r->win_open < t->open))
			t->open = r->win_open;
		if (r->win_close > t->close)
			t->close = r->win_close;
		if (lat)
			hist_merge(lat, &r->lat);
	}
	t->cpu = t->s.cpu_user + t->s.cpu_sys;
}

static double per_sec(double x, double secs) { return secs > 0 ? x / secs : 0; }
static double ns_per(double secs, uint64_t n) { return n ? secs * 1e9 / (double)n : 0; }

static int run_passive(void)
{
	int ready_rd, go_wr;
	fork_tasks(&ready_rd, &go_wr, NULL);
	close(go_wr);
	wait_ready(ready_rd);
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &O.bind.sin_addr, a, sizeof(a));
	printf("# rdsstress-c passive on %s ports %u-%u (%d tasks)\n", a, ntohs(O.bind.sin_port),
	       ntohs(O.bind.sin_port) + O.tasks - 1, O.tasks);
	printf("READY\n");
	fflush(stdout);
	for (int left = O.tasks; left > 0;)
		left -= reap(1);
	struct totals t;
	sum_results(&t, NULL);
	double secs = t.close > t.open ? (double)(t.close - t.open) * 1e-9 : 0;
	printf("# passive: %llu messages in the window over %.3f s, %llu in all, %llu acks, %llu sequence errors, %llu foreign, %llu verify errors, %llu RDMA registrations\n",
	       (unsigned long long)t.s.win_msgs, secs, (unsigned long long)t.s.received, (unsigned long long)t.s.acks,
	       (unsigned long long)t.s.seq_errors, (unsigned long long)t.s.foreign, (unsigned long long)t.s.verify_errors,
	       (unsigned long long)t.s.registrations);
	printf("RESULT tasks=%d secs=%.6f msgs=%llu bytes=%llu rate=%.1f mb_s=%.3f cpu_user_s=%.6f cpu_sys_s=%.6f cpu_ns_per_msg=%.1f "
	       "received=%llu acks=%llu seq_errors=%llu foreign=%llu verify_errors=%llu registrations=%llu tasks_finished=%llu\n",
	       O.tasks, secs, (unsigned long long)t.s.win_msgs, (unsigned long long)t.s.win_bytes, per_sec((double)t.s.win_msgs, secs),
	       per_sec((double)t.s.win_bytes, secs) / 1e6, t.s.cpu_user, t.s.cpu_sys, ns_per(t.cpu, t.s.win_msgs),
	       (unsigned long long)t.s.received, (unsigned long long)t.s.acks, (unsigned long long)t.s.seq_errors,
	       (unsigned long long)t.s.foreign, (unsigned long long)t.s.verify_errors, (unsigned long long)t.s.registrations,
	       (unsigned long long)t.s.finished);
	fflush(stdout);
	return t.s.seq_errors || t.s.verify_errors || t.s.finished != (uint64_t)O.tasks;
}

static int run_active(void)
{
	int64_t *t0 = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t0 == MAP_FAILED)
		fail_errno("mmap");
	int ready_rd, go_wr;
	fork_tasks(&ready_rd, &go_wr, t0);
	wait_ready(ready_rd);
	*t0 = now_ns();
	close(go_wr); /* go */
	int64_t open = *t0 + (int64_t)(O.warm * 1e9), close_at = open + (int64_t)(O.dur * 1e9);
	sleep_until(open);
	double busy0 = machine_busy();
	sleep_until(close_at);
	double busy1 = machine_busy();
	for (int left = O.tasks; left > 0;)
		left -= reap(1);

	static struct hist lat;
	lat.highest = -1;
	struct totals t;
	sum_results(&t, &lat);
	double secs = t.close > t.open ? (double)(t.close - t.open) * 1e-9 : 0;
	double machine = busy0 >= 0 && busy1 >= 0 ? busy1 - busy0 : -1;
	int rdma = rdma_mode();
	int match = t.s.peer_counted == t.s.sent;
	int accounted = !rdma || (t.s.completed == t.s.sent && t.s.notices == t.s.notified);
	char b[INET_ADDRSTRLEN], p[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &O.bind.sin_addr, b, sizeof(b));
	inet_ntop(AF_INET, &O.peer.sin_addr, p, sizeof(p));
	printf("# rdsstress-c active %s: %s -> %s:%u, %d tasks, depth %d, size %zu", mode_names[O.mode], b, p,
	       ntohs(O.peer.sin_port), O.tasks, O.depth, rdma ? O.rdma_size : O.size);
	if (O.mode == M_RR)
		printf(", ack %zu", O.ack_size);
	if (rdma)
		printf(", notify every %d%s", O.notify, O.fence ? ", fenced" : "");
	printf(", window %.3f s\n", secs);
	printf("# %llu in the window (%.0f/s, %.2f MB/s), %llu in all, %llu completed, passive counted %llu (%s), %llu congested\n",
	       (unsigned long long)t.s.win_msgs, per_sec((double)t.s.win_msgs, secs), per_sec((double)t.s.win_bytes, secs) / 1e6,
	       (unsigned long long)t.s.sent, (unsigned long long)t.s.completed, (unsigned long long)t.s.peer_counted,
	       match ? "matches" : "MISMATCH", (unsigned long long)t.s.congested);
	if (lat.n)
		printf("# latency min %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f us (%llu samples)\n", (double)lat.min / 1e3,
		       (double)hist_quantile(&lat, 0.5) / 1e3, (double)hist_quantile(&lat, 0.9) / 1e3,
		       (double)hist_quantile(&lat, 0.99) / 1e3, (double)hist_quantile(&lat, 0.999) / 1e3, (double)lat.max / 1e3,
		       (unsigned long long)lat.n);
	printf("# cpu %.3f s user + %.3f s system in the tasks (%.0f ns per message)\n", t.s.cpu_user, t.s.cpu_sys,
	       ns_per(t.cpu, t.s.win_msgs));
	printf("RESULT tasks=%d depth=%d size=%zu ack_size=%zu rdma_size=%zu notify=%d secs=%.6f msgs=%llu bytes=%llu rate=%.1f mb_s=%.3f "
	       "lat_n=%llu lat_min_ns=%llu lat_p50_ns=%llu lat_p90_ns=%llu lat_p99_ns=%llu lat_p999_ns=%llu lat_max_ns=%llu lat_mean_ns=%.0f "
	       "cpu_user_s=%.6f cpu_sys_s=%.6f cpu_ns_per_msg=%.1f machine_cpu_s=%.3f machine_cpu_ns_per_msg=%.1f "
	       "sent=%llu completed=%llu peer_counted=%llu counts_match=%d congested=%llu seq_errors=%llu verify_errors=%llu "
	       "notified=%llu notices=%llu late_notices=%llu early_reads=%llu failed=%llu accounted=%d\n",
	       O.tasks, O.depth, rdma ? 0 : O.size, O.mode == M_RR ? O.ack_size : 0, rdma ? O.rdma_size : 0, rdma ? O.notify : 0,
	       secs, (unsigned long long)t.s.win_msgs, (unsigned long long)t.s.win_bytes, per_sec((double)t.s.win_msgs, secs),
	       per_sec((double)t.s.win_bytes, secs) / 1e6, (unsigned long long)lat.n, (unsigned long long)lat.min,
	       (unsigned long long)hist_quantile(&lat, 0.5), (unsigned long long)hist_quantile(&lat, 0.9),
	       (unsigned long long)hist_quantile(&lat, 0.99), (unsigned long long)hist_quantile(&lat, 0.999),
	       (unsigned long long)lat.max, lat.n ? lat.sum / (double)lat.n : 0, t.s.cpu_user, t.s.cpu_sys,
	       ns_per(t.cpu, t.s.win_msgs), machine, machine >= 0 ? ns_per(machine, t.s.win_msgs) : -1,
	       (unsigned long long)t.s.sent, (unsigned long long)t.s.completed, (unsigned long long)t.s.peer_counted, match,
	       (unsigned long long)t.s.congested, (unsigned long long)t.s.seq_errors, (unsigned long long)t.s.verify_errors,
	       (unsigned long long)t.s.notified, (unsigned long long)t.s.notices, (unsigned long long)t.s.late_notices,
	       (unsigned long long)t.s.early_reads, (unsigned long long)t.s.failed, accounted);
	fflush(stdout);
	if (!match)
		fprintf(stderr, "rdsstress-c: the passive side counted %llu but %llu were sent\n",
			(unsigned long long)t.s.peer_counted, (unsigned long long)t.s.sent);
	if (!accounted)
		fprintf(stderr, "rdsstress-c: %llu RDMA operations issued, %llu completed, %llu notices for %llu notified\n",
			(unsigned long long)t.s.sent, (unsigned long long)t.s.completed, (unsigned long long)t.s.notices,
			(unsigned long long)t.s.notified);
	if (t.s.seq_errors || t.s.verify_errors)
		fprintf(stderr, "rdsstress-c: %llu sequence errors, %llu verify errors\n", (unsigned long long)t.s.seq_errors,
			(unsigned long long)t.s.verify_errors);
	return !match || !accounted || t.s.seq_errors || t.s.verify_errors || t.s.win_msgs == 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "active"))
		O.active = 1;
	else if (strcmp(argv[1], "passive"))
		usage_error("the first argument is the side: active or passive, not %s", argv[1]);
	parse_opts(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	enter_netns();
	size_t bytes = sizeof(struct task_res) * (size_t)O.tasks;
	results = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (results == MAP_FAILED)
		fail_errno("mmap (results)");
	pids = calloc(O.tasks, sizeof(pid_t));
	if (!pids)
		fail_errno("calloc");
	return O.active ? run_active() : run_passive();
}
