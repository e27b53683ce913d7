//go:build linux

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/barrier"
	"github.com/go-rds/rds/cmsg"
	"github.com/go-rds/rds/rdmaops"
	"github.com/go-rds/rds/rdssock"
)

// Roles lists the worker roles, the same in Go and in the C baseline.
var Roles = []string{"recv", "send", "echo", "ping", "rdma-target", "rdma-init"}

// Worker runs one Go worker role with key=value arguments (see Options),
// printing "READY" once its socket is bound and, for measuring roles,
// "WINDOW" when the measurement window opens and one "RESULT key=value..."
// line at its end to out. Roles that serve a peer (send, echo,
// rdma-target) run until the process is killed or an error occurs.
//
// The role "wakecode" is the Go side of "What the VM charges for code" and
// takes the arguments MODE K N of cbaseline/wakecode.c instead.
//
// The Go workers use package rdssock (and rdmaops for RDMA) on non-blocking
// sockets served by the Go runtime poller; their results also carry the
// heap allocations made in the measurement window ("allocs").
func Worker(role string, args []string, out io.Writer) error {
	if role == "wakecode" {
		return wakeCodeWorker(args, out)
	}
	o, err := ParseOptions(args)
	if err != nil {
		return err
	}
	if o.Procs > 0 {
		runtime.GOMAXPROCS(o.Procs)
	}
	if o.AllocSites {
		runtime.MemProfileRate = 1
		siteOut = out
	}
	switch role {
	case "recv":
		return goRecv(o, out)
	case "send":
		return goSend(o, out)
	case "echo":
		return goEcho(o, out)
	case "ping":
		return goPing(o, out)
	case "rdma-target":
		return goRDMATarget(o, out)
	case "rdma-init":
		return goRDMAInit(o, out)
	}
	return fmt.Errorf("unknown role %q (want one of %v)", role, Roles)
}

func listen(o *Options, cfg rdssock.Config) (*rdssock.Conn, error) {
	cfg.Timestamps = o.TS
	if o.NetNS != "" {
		fd, err := unix.Open(o.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", o.NetNS, err)
		}
		defer unix.Close(fd)
		cfg.NetNS = fd
	}
	return rdssock.Listen(o.Bind, &cfg)
}

func ready(out io.Writer) { fmt.Fprintln(out, "READY") }

// windowOpen tells the driver that the measurement window has opened: it
// reads the CPU time of both processes at this line and at RESULT.
func windowOpen(out io.Writer) { fmt.Fprintln(out, "WINDOW") }

// statm reads the resident set size from /proc/self/smaps_rollup through
// a descriptor opened once, without allocating. (/proc/self/statm lags on
// kernels that batch RSS counter updates per thread.)
type statm struct {
	fd  int
	buf [4096]byte
}

func openStatm() *statm {
	fd, err := unix.Open("/proc/self/smaps_rollup", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &statm{fd: -1}
	}
	return &statm{fd: fd}
}

var (
	rssKey  = []byte("\nRss:")
	anonKey = []byte("\nAnonymous:")
)

// kib returns the resident set size in KiB, or -1.
func (s *statm) kib() int64 { return s.field(rssKey) }

// anon returns the anonymous memory (heap, stacks) in KiB, or -1.
func (s *statm) anon() int64 { return s.field(anonKey) }

func (s *statm) field(key []byte) int64 {
	if s.fd < 0 {
		return -1
	}
	n, err := unix.Pread(s.fd, s.buf[:], 0)
	if err != nil || n <= 0 {
		return -1
	}
	b := s.buf[:n]
	i := bytes.Index(b, key)
	if i < 0 {
		return -1
	}
	b = bytes.TrimLeft(b[i+len(key):], " ")
	var kib int64
	for len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		kib = kib*10 + int64(b[0]-'0')
		b = b[1:]
	}
	return kib
}

// threads returns the number of OS threads of the process, from
// /proc/self/stat, or -1. It allocates; call it outside the hot loop.
func threads() int {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	// Fields after the command (which is in parentheses); num_threads is
	// field 20, the 18th after ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 18 {
		return -1
	}
	n, err := strconv.Atoi(f[17])
	if err != nil {
		return -1
	}
	return n
}

// ctxtSwitches returns the context switches of the whole system so far
// (the "ctxt" line of /proc/stat), or -1. It allocates: read it outside
// the window's allocation count.
func ctxtSwitches() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	_, rest, ok := bytes.Cut(b, []byte("\nctxt "))
	if !ok {
		return -1
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// mallocs returns the number of heap objects allocated so far. With
// allocation sites on, its first call in a window snapshots the memory
// profile and its second prints the sites of the allocations in between.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if siteOut != nil {
		if siteBase == nil {
			siteBase = memSites()
		} else {
			printSites(siteOut, siteBase, memSites())
			siteBase = nil
		}
	}
	return ms.Mallocs
}

var (
	siteOut  io.Writer
	siteBase map[[32]uintptr]int64
)

// memSites returns the allocation counts of the memory profile by stack.
// The profile is published at the end of a GC cycle, so it runs one.
func memSites() map[[32]uintptr]int64 {
	runtime.GC()
	runtime.GC()
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, true)
	m := make(map[[32]uintptr]int64, n)
	for _, r := range recs[:n] {
		m[r.Stack0] += r.AllocObjects
	}
	return m
}

func printSites(out io.Writer, before, after map[[32]uintptr]int64) {
	for stk, n := range after {
		d := n - before[stk]
		if d <= 0 {
			continue
		}
		var names []string
		frames := runtime.CallersFrames(stk[:])
		for {
			f, more := frames.Next()
			if f.Function != "" {
				names = append(names, fmt.Sprintf("%s:%d", f.Function, f.Line))
			}
			if !more || len(names) == 8 {
				break
			}
		}
		fmt.Fprintf(out, "ALLOCSITE n=%d %s\n", d, strings.Join(names, " < "))
	}
}

// countStamps walks the control messages of one message as an application
// would and counts the SCM_TIMESTAMPs.
func countStamps(oob []byte) int {
	n := 0
	p := cmsg.NewParser(oob)
	for {
		m, err := p.Next()
		if err != nil {
			return n
		}
		if m.Is(cmsg.LevelSocket, cmsg.TypeTimestamp) {
			if _, err := m.Timestamp(); err == nil {
				n++
			}
		}
	}
}

func goRecv(o *Options, out io.Writer) error {
	c, err := listen(o, rdssock.Config{})
	if err != nil {
		return err
	}
	defer c.Close()
	st := openStatm()
	var (
		buf []byte
		oob []byte
		ms  []rdssock.Message
	)
	var raw *rawIO
	if o.Raw != 0 {
		if raw, err = newRawIO(c, o.Raw == 2); err != nil {
			return err
		}
	}
	if o.Batch == 1 {
		buf, oob = make([]byte, o.Size), make([]byte, cmsg.MaxReceiveSpace)
	} else {
		ms = make([]rdssock.Message, o.Batch)
		data := make([]byte, o.Size*o.Batch)
		ctl := make([]byte, cmsg.MaxReceiveSpace*o.Batch)
		for i := range ms {
			ms[i].Buffer = data[i*o.Size : (i+1)*o.Size]
			ms[i].OOB = ctl[i*cmsg.MaxReceiveSpace : (i+1)*cmsg.MaxReceiveSpace]
		}
	}
	ready(out)

	var first, start, end, last, nextRSS time.Time
	var msgs, nbytes, stamps, allocs0 uint64
	var rssStart, rssMax, anonStart int64 = -1, -1, -1
	var rss10, anon10 int64 = -1, -1 // ten seconds into the window
	threads0 := -1
	var ctxt0 int64 = -1
	for {
		got := 1
		if o.Batch == 1 {
			var n, oobn, flags int
			if raw != nil {
				n, oobn, flags, _, err = raw.read(buf, oob)
			} else {
				n, oobn, flags, _, err = c.ReadMsg(buf, oob)
			}
			if err != nil {
				return err
			}
			if flags&unix.MSG_TRUNC != 0 {
				return fmt.Errorf("message truncated")
			}
			if !start.IsZero() {
				nbytes += uint64(n)
				if o.TS {
					stamps += uint64(countStamps(oob[:oobn]))
				}
			}
		} else {
			got, err = c.ReadBatch(context.Background(), ms, 0)
			if err != nil {
				return err
			}
			if !start.IsZero() {
				for i := range got {
					m := &ms[i]
					if m.Flags&unix.MSG_TRUNC != 0 {
						return fmt.Errorf("message truncated")
					}
					nbytes += uint64(m.N)
					if o.TS {
						stamps += uint64(countStamps(m.OOB[:m.NN]))
					}
				}
			}
		}
		t := time.Now()
		if first.IsZero() {
			first = t
			continue
		}
		if start.IsZero() {
			if t.Sub(first) < o.Warm {
				continue
			}
			start, end = t, t.Add(o.Dur)
			windowOpen(out)
			threads0 = threads()
			ctxt0 = ctxtSwitches()
			// ReadMemStats (in mallocs) touches a few hundred KiB the
			// first time: take the RSS after it.
			allocs0 = mallocs()
			rssStart = st.kib()
			anonStart = st.anon()
			rssMax = rssStart
			nextRSS = t.Add(time.Second)
			continue
		}
		msgs += uint64(got)
		last = t
		if !t.Before(nextRSS) {
			r := st.kib()
			rssMax = max(rssMax, r)
			if rss10 < 0 && t.Sub(start) >= 10*time.Second {
				rss10, anon10 = r, st.anon()
			}
			nextRSS = t.Add(time.Second)
		}
		if !t.Before(end) {
			break
		}
	}
	allocs := mallocs() - allocs0
	ctxt := ctxtSwitches() - ctxt0
	rssEnd, anonEnd := st.kib(), st.anon()
	threads1 := threads()
	secs := last.Sub(start).Seconds()
	fmt.Fprintf(out, "RESULT msgs=%d bytes=%d secs=%.6f rate=%.1f cmsgs=%d rss_start_kib=%d rss_end_kib=%d rss_max_kib=%d anon_start_kib=%d anon_end_kib=%d rss_10s_kib=%d anon_10s_kib=%d threads_start=%d threads_end=%d allocs=%d ctxt=%d\n",
		msgs, nbytes, secs, float64(msgs)/secs, stamps, rssStart, rssEnd, max(rssMax, rssEnd), anonStart, anonEnd, rss10, anon10, threads0, threads1, allocs, ctxt)
	return nil
}

// goSend sends until killed. A congested destination makes the send wait in
// the runtime poller (rdssock.Config.WaitCongested), as a blocking C socket
// sleeps in the kernel; the raw diagnostic path gets ENOBUFS instead, waits
// for the congestion update (RDS_CONG_MONITOR) and retries. Halfway through its own window it prints a RESULT with its send
// rate and allocations, then keeps sending.
func goSend(o *Options, out io.Writer) error {
	c, err := listen(o, rdssock.Config{CongestionMonitor: true, WaitCongested: o.Raw == 0})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, o.Size)
	oob := make([]byte, 4*cmsg.CongUpdateSpace)
	var raw *rawIO
	if o.Raw != 0 {
		if raw, err = newRawIO(c, o.Raw == 2); err != nil {
			return err
		}
		raw.setDest(o.Peer)
	}
	var ms []rdssock.Message
	if o.Batch > 1 {
		ms = make([]rdssock.Message, o.Batch)
		for i := range ms {
			ms[i] = rdssock.Message{Buffer: buf, Addr: o.Peer}
		}
	}
	ready(out)

	var first, start time.Time
	var calls, sent, inWindow, allocs0, congWaits, sendWaits0 uint64
	reported := false
	next := 0
	for {
		var err error
		switch {
		case raw != nil:
			if err = raw.write(buf); err == nil {
				sent++
			} else if err == unix.ENOBUFS {
				congWaits++
				if _, _, _, _, err := raw.read(nil, oob); err != nil {
					return err
				}
				continue
			}
		case ms == nil:
			_, err = c.WriteMsg(buf, nil, o.Peer)
			if err == nil {
				sent++
			}
		default:
			var n int
			n, err = c.WriteBatch(context.Background(), ms[next:], 0)
			sent += uint64(n)
			if next += n; next == len(ms) {
				next = 0
			}
		}
		if err != nil {
			if !errors.Is(err, rdssock.ErrCongested) {
				return err
			}
			congWaits++
			if _, _, _, _, err := c.ReadMsg(nil, oob); err != nil && !errors.Is(err, rdssock.ErrTruncated) {
				return err
			}
			continue
		}
		// Look at the clock once every 256 calls.
		if calls++; reported || calls&255 != 1 {
			continue
		}
		t := time.Now()
		switch {
		case first.IsZero():
			first = t
		case start.IsZero():
			if t.Sub(first) >= o.Warm {
				start, inWindow, allocs0 = t, sent, mallocs()
				if raw != nil {
					sendWaits0 = raw.sendWaits
				}
			}
		case t.Sub(start) >= o.Dur/2:
			allocs := mallocs() - allocs0
			n := sent - inWindow
			secs := t.Sub(start).Seconds()
			waits := "" // counted by the raw path only
			if raw != nil {
				waits = fmt.Sprintf(" send_waits=%d", raw.sendWaits-sendWaits0)
			}
			fmt.Fprintf(out, "RESULT msgs=%d secs=%.6f rate=%.1f allocs=%d cong_waits=%d%s\n", n, secs, float64(n)/secs, allocs, congWaits, waits)
			reported = true
		}
	}
}

func goEcho(o *Options, out io.Writer) error {
	c, err := listen(o, rdssock.Config{CongestionMonitor: true, WaitCongested: o.Raw == 0, BusyPoll: o.Spin})
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, max(o.Size, 1<<16))
	oob := make([]byte, cmsg.MaxReceiveSpace)
	ready(out)
	if o.Raw != 0 {
		return rawEcho(c, buf, oob, o.Raw == 2)
	}
	for {
		n, _, _, from, err := c.ReadMsg(buf, oob)
		if err != nil {
			return err
		}
		if !from.IsValid() {
			continue // a control-only notice
		}
		for {
			_, err := c.WriteMsg(buf[:n], nil, from)
			if err == nil {
				break
			}
			if !errors.Is(err, rdssock.ErrCongested) {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func goPing(o *Options, out io.Writer) error {
	c, err := listen(o, rdssock.Config{BusyPoll: o.Spin})
	if err != nil {
		return err
	}
	defer c.Close()
	rtt := make([]int64, 0, 1<<20)
	msg, in := make([]byte, o.Size), make([]byte, o.Size)
	oob := make([]byte, cmsg.MaxReceiveSpace)
	var raw *rawIO
	if o.Raw != 0 {
		if raw, err = newRawIO(c, o.Raw == 2); err != nil {
			return err
		}
		raw.setDest(o.Peer)
	}
	first := time.Now()
	var start, end time.Time
	var allocs0 uint64
	var ctxt0 int64 = -1
	for {
		t0 := time.Now()
		for raw != nil {
			err := raw.write(msg)
			if err == nil {
				break
			}
			if err != unix.ENOBUFS {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		for raw == nil {
			_, err := c.WriteMsg(msg, nil, o.Peer)
			if err == nil {
				break
			}
			if !errors.Is(err, rdssock.ErrCongested) {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		for {
			var named bool
			var err error
			if raw != nil {
				_, _, _, named, err = raw.read(in, oob)
			} else {
				var from netip.AddrPort
				_, _, _, from, err = c.ReadMsg(in, oob)
				named = from.IsValid()
			}
			if err != nil {
				return err
			}
			if named {
				break // the reply; control-only notices are skipped
			}
		}
		// One monotonic clock read inside the round trip, as the C
		// program's clock_gettime (time.Now reads two clocks).
		rt := time.Since(t0)
		t1 := t0.Add(rt)
		if start.IsZero() {
			if t1.Sub(first) >= o.Warm {
				start, end = t1, t1.Add(o.Dur)
				windowOpen(out)
				ctxt0 = ctxtSwitches()
				allocs0 = mallocs()
			}
			continue
		}
		if len(rtt) < cap(rtt) {
			rtt = append(rtt, int64(rt))
		}
		if !t1.Before(end) {
			break
		}
	}
	allocs := mallocs() - allocs0
	ctxt := ctxtSwitches() - ctxt0
	slices.Sort(rtt)
	secs := end.Sub(start).Seconds()
	fmt.Fprintf(out, "RESULT msgs=%d secs=%.6f rate=%.1f p50_ns=%d p99_ns=%d allocs=%d ctxt=%d ctxt_per_msg=%.3f\n",
		len(rtt), secs, float64(len(rtt))/secs, Percentile(rtt, 0.50), Percentile(rtt, 0.99), allocs, ctxt, float64(ctxt)/float64(max(len(rtt), 1)))
	return nil
}

// rawEcho is goEcho with the raw=1 message path.
func rawEcho(c *rdssock.Conn, buf, oob []byte, blocking bool) error {
	raw, err := newRawIO(c, blocking)
	if err != nil {
		return err
	}
	for {
		n, _, _, named, err := raw.read(buf, oob)
		if err != nil {
			return err
		}
		if !named {
			continue
		}
		raw.replyToLast()
		for {
			err := raw.write(buf[:n])
			if err == nil {
				break
			}
			if err != unix.ENOBUFS {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// goRDMATarget registers Size*Depth bytes for remote writes with one
// RDS_CMSG_RDMA_MAP message to the peer, then drains its socket until
// killed.
func goRDMATarget(o *Options, out io.Writer) error {
	c, err := listen(o, rdssock.Config{})
	if err != nil {
		return err
	}
	defer c.Close()
	rc := rdmaops.New(c, nil, &rdmaops.Options{Registration: rdmaops.RegMap, MapRetries: 200, MapBackoff: 10 * time.Millisecond})
	region, err := rdmaops.NewRegion(o.Size * o.Depth)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rc.Register(ctx, region.Span(0, o.Size*o.Depth), cmsg.FlagReadWrite, o.Peer, []byte("map\x00")); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	ready(out)
	buf, oob := make([]byte, 1024), make([]byte, cmsg.MaxReceiveSpace)
	for {
		if _, _, _, _, err := c.ReadMsg(buf, oob); err != nil && !errors.Is(err, rdssock.ErrTruncated) {
			return err
		}
	}
}

// goRDMAInit waits for the peer's cookie, then issues RDMA WRITEs of Size
// bytes with notify, Depth of them outstanding, and counts the completions
// in the window. Completion notices go through the barrier tracker.
func goRDMAInit(o *Options, out io.Writer) error {
	c, err := listen(o, rdssock.Config{})
	if err != nil {
		return err
	}
	defer c.Close()
	ready(out)
	st := openStatm()
	tr := barrier.New(&barrier.Config{Capacity: 4 * o.Depth})
	defer tr.Close()
	rc := rdmaops.New(c, tr, nil)
	buf := make([]byte, 1024)
	oob := make([]byte, max(o.Depth*cmsg.RDMAStatusSpace, cmsg.MaxReceiveSpace))
	var cookie cmsg.Cookie
	for {
		_, oobn, _, _, err := c.ReadMsg(buf, oob)
		if err != nil {
			return fmt.Errorf("waiting for the cookie: %w", err)
		}
		ck, ok, _, err := rc.HandleControl(oob[:oobn])
		if err != nil {
			return err
		}
		if ok {
			cookie = ck
			break
		}
	}
	region, err := rdmaops.NewRegion(o.Size * o.Depth)
	if err != nil {
		return err
	}
	b := region.Bytes()
	for i := range b {
		b[i] = 0x5a
	}
	// One Op per slot, built once and reused.
	spans := make([]rdmaops.Span, o.Depth)
	ops := make([]rdmaops.Op, o.Depth)
	for i := range ops {
		spans[i] = region.Span(i*o.Size, o.Size)
		ops[i] = rdmaops.Op{Write: true, Remote: cookie, RemoteOffset: uint64(i * o.Size), Local: spans[i : i+1]}
	}
	ctx := context.Background()

	var first, start, end, last time.Time
	var issued, inWindow, allocs0 uint64
	var rssStart int64 = -1
	inflight := 0
	for {
		for inflight < o.Depth {
			slot := issued % uint64(o.Depth)
			for {
				_, err := rc.Do(ctx, o.Peer, &ops[slot])
				if err == nil {
					break
				}
				if !errors.Is(err, rdssock.ErrCongested) && !errors.Is(err, unix.EAGAIN) {
					return fmt.Errorf("RDMA write: %w", err)
				}
				time.Sleep(time.Millisecond)
			}
			issued++
			inflight++
		}
		_, oobn, _, _, err := c.ReadMsg(buf, oob)
		if err != nil && !errors.Is(err, rdssock.ErrTruncated) {
			return err
		}
		got, err := tr.Process(oob[:oobn])
		if err != nil {
			return err
		}
		inflight -= got
		if got == 0 {
			continue
		}
		t := time.Now()
		if first.IsZero() {
			first = t
		}
		if start.IsZero() {
			if t.Sub(first) >= o.Warm {
				start, end = t, t.Add(o.Dur)
				windowOpen(out)
				allocs0 = mallocs()
				rssStart = st.kib()
			}
			continue
		}
		inWindow += uint64(got)
		last = t
		if !t.Before(end) {
			break
		}
	}
	allocs := mallocs() - allocs0
	stats := tr.Stats()
	failed := stats.Begun - stats.Completed[barrier.Success] - uint64(tr.Outstanding())
	secs := last.Sub(start).Seconds()
	fmt.Fprintf(out, "RESULT msgs=%d secs=%.6f rate=%.1f failed=%d completed=%d rss_start_kib=%d rss_end_kib=%d allocs=%d\n",
		inWindow, secs, float64(inWindow)/secs, failed, stats.Completed[barrier.Success], rssStart, st.kib(), allocs)
	if failed > 0 {
		return fmt.Errorf("%d RDMA operations failed (%+v)", failed, stats.Completed)
	}
	return nil
}
