//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/integration/vmtest"
)

// impl is one of the two implementations under comparison.
type impl struct {
	name  string
	bin   string
	pre   []string
	extra []string // arguments after the options
}

func (i impl) args(role string, o *Options) []string {
	return append(append(append(append([]string(nil), i.pre...), role), o.Args()...), i.extra...)
}

// pairing says which implementation plays each side of a workload: main
// measures (receiver, ping client, RDMA initiator), peer serves it
// (sender, echo server, RDMA target).
type pairing struct {
	name       string
	main, peer impl
}

func same(im impl) pairing { return pairing{name: im.name, main: im, peer: im} }

// Run runs every workload Rounds times with the C baseline and the Go
// workers alternately inside the rdsvm guest topology (see package
// integration/vmtest), then the long resident-memory run, and returns the
// report. A failed round is recorded in Report.Failures and leaves its
// workload with fewer values; Run itself fails only on bad configuration.
func Run(cfg *Config) (*Report, error) {
	if cfg.CBinary == "" || cfg.GoBinary == "" {
		return nil, errors.New("bench: CBinary and GoBinary are required")
	}
	if cfg.WakeRounds > 0 && cfg.WakeC == "" {
		return nil, errors.New("bench: WakeRounds needs WakeC")
	}
	c := *cfg
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
	if c.Warm <= 0 {
		c.Warm = 500 * time.Millisecond
	}
	if c.Window <= 0 {
		c.Window = 2 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.ExtraRounds == 0 {
		c.ExtraRounds = 4
	}
	if c.NoisySpread <= 0 {
		c.NoisySpread = 0.3
	}
	if c.DiagRounds <= 0 {
		c.DiagRounds = 3
	}
	d := &driver{cfg: &c, port: 20000, pin: -1, pin2: -1}
	d.impls = [2]impl{{name: "C", bin: c.CBinary}, {name: "Go", bin: c.GoBinary, pre: c.GoArgs}}
	if c.abMode() {
		d.impls[0].name, d.impls[1].name = "A", "B" // the tools rounds' names
	}
	if c.AllocSites {
		d.impls[1].extra = []string{"allocsites=1"}
	}
	rep := &Report{Kernel: vmtest.KernelRelease(), Started: time.Now(), Rounds: c.Rounds, Warm: c.Warm, Window: c.Window}
	if c.ExtraRounds > 0 {
		rep.ExtraRounds, rep.NoisySpread = c.ExtraRounds, c.NoisySpread
	}
	for _, w := range c.Workloads {
		d.runWorkload(rep, w)
	}
	d.runTools(rep)
	for _, w := range c.Diagnose {
		d.diagnose(rep, w)
	}
	if c.LongRun > 0 {
		rep.LongWarm = longWarm
		d.longRun(rep)
	}
	if c.WakeRounds > 0 {
		d.wakeCode(rep)
	}
	rep.Settle = d.settle
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}

type driver struct {
	cfg    *Config
	impls  [2]impl
	port   uint16
	pin    int // CPU the workers being started are bound to, or -1
	pin2   int // CPU of the second worker of a pair, if not -1 (else pin)
	settle Settle
}

func (d *driver) logf(format string, a ...any) {
	fmt.Fprintf(d.cfg.Log, format+"\n", a...)
}

func (d *driver) ports() (uint16, uint16) {
	d.port += 2
	return d.port, d.port + 1
}

// outcome is what one round of one implementation produced.
type outcome struct {
	main Result // the measuring side: receiver, ping client or RDMA initiator
	peer Result // the Go sender's own RESULT, if it printed one
	// cpu is the CPU time of the measuring side and of its peer over the
	// window, in clock ticks (see cpuWindow).
	cpu *cpuWindow
}

// cpuWindow reads the CPU time (utime+stime from /proc/PID/stat) of both
// processes of a run when the measuring worker prints WINDOW and when it
// prints RESULT. It is called in the goroutine that reads the measuring
// worker's output, before the RESULT is handed on, so that neither process
// has been killed or reaped yet.
type cpuWindow struct {
	mu         sync.Mutex
	pids       [2]int  // measuring side, peer
	begin, end []int64 // ticks at WINDOW and at RESULT
	err        error   // why a reading failed
}

func (w *cpuWindow) setPID(i, pid int) {
	w.mu.Lock()
	w.pids[i] = pid
	w.mu.Unlock()
}

// mark reads both processes' CPU time at a WINDOW or RESULT line.
func (w *cpuWindow) mark(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	opening := line == "WINDOW"
	if w.err != nil || (!opening && (w.begin == nil || w.end != nil)) {
		return
	}
	if w.pids[0] == 0 || w.pids[1] == 0 {
		w.err = errors.New("the window opened before both processes had started")
		return
	}
	t, err := cpuTicks(w.pids[0], w.pids[1])
	switch {
	case err != nil:
		w.err = err
	case opening:
		w.begin, w.end = t, nil
	default:
		w.end = t
	}
}

// perMsg returns the CPU time per message in microseconds of the
// measuring side and of the peer over msgs messages.
func (w *cpuWindow) perMsg(msgs float64) (main, peer float64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return 0, 0, fmt.Errorf("CPU time: %w", w.err)
	case w.begin == nil || w.end == nil:
		return 0, 0, errors.New("CPU time: the worker printed no WINDOW line before its RESULT")
	}
	return CPUPerMsg(w.end[0]-w.begin[0], msgs), CPUPerMsg(w.end[1]-w.begin[1], msgs), nil
}

func (d *driver) runWorkload(rep *Report, w Workload) {
	metrics := w.Metrics()
	rows := make([]Row, len(metrics), len(metrics)+2)
	for i, m := range metrics {
		rows[i] = Row{Workload: w.Name, Metric: m.Label, Goal: m.Goal}
	}
	mainSide, peerSide := w.Sides()
	cpuMain, cpuPeer := len(rows), len(rows)+1
	rows = append(rows, Row{Workload: w.Name, Metric: CPULabel(mainSide), Goal: GoalCPU}, Row{Workload: w.Name, Metric: CPULabel(peerSide), Goal: GoalCPU})
	var allocMain, allocPeer Alloc
	allocMain.Workload, allocPeer.Workload = w.Name, w.Name
	switch w.Kind {
	case Throughput:
		allocMain.Side, allocPeer.Side = "receiver", "sender"
		allocMain.What, allocPeer.What = "ReadMsg", "WriteMsg"
		if w.Batch > 1 {
			allocMain.What, allocPeer.What = "ReadBatch", "WriteBatch"
		}
	case Latency:
		allocMain.Side, allocMain.What = "client", "WriteMsg+ReadMsg"
	case RDMA:
		allocMain.Side, allocMain.What = "initiator", "Do+ReadMsg+Tracker.Process"
	}
	var errs []string
	rounds := d.cfg.Rounds
	for r := 0; r < rounds; r++ {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		var line []string
		for _, k := range order {
			im := d.impls[k]
			out, err := d.runOnce(same(im), w)
			if err != nil {
				msg := fmt.Sprintf("%s round %d %s: %v", w.Name, r+1, im.name, err)
				d.logf("  %s", msg)
				errs = append(errs, msg)
				rep.Failures = append(rep.Failures, msg)
				continue
			}
			add := func(i int, v float64) {
				if k == 0 {
					rows[i].C = append(rows[i].C, v)
				} else {
					rows[i].Go = append(rows[i].Go, v)
				}
			}
			for i, m := range metrics {
				add(i, out.main[m.Key]*m.Scale)
			}
			if cm, cp, err := out.cpu.perMsg(out.main["msgs"]); err != nil {
				msg := fmt.Sprintf("%s round %d %s: %v", w.Name, r+1, im.name, err)
				d.logf("  %s", msg)
				rep.Failures = append(rep.Failures, msg)
			} else {
				add(cpuMain, cm)
				add(cpuPeer, cp)
			}
			line = append(line, fmt.Sprintf("%s %s %s", im.name, fmtNum(out.main[metrics[0].Key]*metrics[0].Scale), metrics[0].Label))
			if k == 1 {
				if a, ok := out.main["allocs"]; ok {
					allocMain.Allocs += uint64(a)
					allocMain.Msgs += uint64(out.main["msgs"])
				}
				if out.peer != nil {
					allocPeer.Allocs += uint64(out.peer["allocs"])
					allocPeer.Msgs += uint64(out.peer["msgs"])
				}
			}
		}
		d.logf("%-28s round %d/%d: %s", w.Name, r+1, rounds, strings.Join(line, ", "))
		if r == d.cfg.Rounds-1 && d.cfg.ExtraRounds > 0 && rows[0].noisy(d.cfg.NoisySpread) {
			rounds += d.cfg.ExtraRounds
			d.logf("%-28s spread above %.0f%%: %d more rounds", w.Name, 100*d.cfg.NoisySpread, d.cfg.ExtraRounds)
		}
	}
	if len(errs) > 0 {
		for i := range rows {
			rows[i].Err = strings.Join(errs, "; ")
		}
	}
	rep.Rows = append(rep.Rows, rows...)
	if allocMain.Msgs > 0 {
		rep.Allocs = append(rep.Allocs, allocMain)
	}
	if allocPeer.Msgs > 0 {
		rep.Allocs = append(rep.Allocs, allocPeer)
	}
}

// diagnose runs w with mixed pairings (each side C or Go) and with the
// raw=1 Go variant, rotating the order every round, to tell which side
// limits the Go result and what the runtime's system call bookkeeping
// costs.
func (d *driver) diagnose(rep *Report, w Workload) {
	c, g := d.impls[0], d.impls[1]
	raw := g
	raw.name, raw.extra = "Go raw", append([]string{"raw=1"}, g.extra...)
	mainName, peerName := "receiver", "sender"
	switch w.Kind {
	case Latency:
		mainName, peerName = "client", "echo"
	case RDMA:
		mainName, peerName = "initiator", "target"
	}
	prs := []pairing{
		same(c), same(g),
		{name: fmt.Sprintf("Go %s, C %s", mainName, peerName), main: g, peer: c},
		{name: fmt.Sprintf("C %s, Go %s", mainName, peerName), main: c, peer: g},
	}
	if w.Kind != RDMA && w.Batch <= 1 {
		blocking := g
		blocking.name, blocking.extra = "Go blocking", append([]string{"raw=2"}, g.extra...)
		oneP := g
		oneP.name, oneP.extra = "Go GOMAXPROCS=1", append([]string{"procs=1"}, g.extra...)
		prs = append(prs, same(raw), same(blocking), same(oneP))
	}
	m := w.Metrics()[0]
	vals := make([][]float64, len(prs))
	for r := 0; r < d.cfg.DiagRounds; r++ {
		var line []string
		for i := range prs {
			k := (i + r) % len(prs)
			out, err := d.runOnce(prs[k], w)
			if err != nil {
				msg := fmt.Sprintf("diagnosis %s round %d %s: %v", w.Name, r+1, prs[k].name, err)
				d.logf("  %s", msg)
				rep.Failures = append(rep.Failures, msg)
				continue
			}
			v := out.main[m.Key] * m.Scale
			vals[k] = append(vals[k], v)
			line = append(line, fmt.Sprintf("%s %s", prs[k].name, fmtNum(v)))
		}
		d.logf("diagnosis %-18s round %d/%d (%s): %s", w.Name, r+1, d.cfg.DiagRounds, m.Label, strings.Join(line, ", "))
	}
	dg := Diagnosis{Workload: w.Name, Metric: m.Label}
	for i, pr := range prs {
		dg.Pairings = append(dg.Pairings, pr.name)
		dg.Values = append(dg.Values, vals[i])
	}
	rep.Diagnoses = append(rep.Diagnoses, dg)
}

const peerNetNS = "/run/netns/" + vmtest.PeerNamespaceName

// loopbackPeer is the address of the peer on the loopback path. RDS keeps
// one connection per address pair, and a connection transmits from one
// context at a time: a send that finds the other direction transmitting
// on the same connection is deferred to the send worker a jiffy later (4
// ms on Debian's kernel). With both ends on 127.0.0.1 a request/response
// round trip hit that almost every time; two addresses give each direction
// its own connection, as two hosts would have.
var loopbackPeer = netip.MustParseAddr("127.0.0.2")

// endpoints returns the addresses of the measuring side (a) and its peer
// (b), and the namespace of a.
func endpoints(p Path, pa, pb uint16) (a, b netip.AddrPort, ns string) {
	switch p {
	case PathTCP:
		return netip.AddrPortFrom(vmtest.TCPPeer4, pa), netip.AddrPortFrom(vmtest.TCPLocal4, pb), peerNetNS
	case PathIB:
		return netip.AddrPortFrom(vmtest.IBAddr2, pa), netip.AddrPortFrom(vmtest.IBAddr1, pb), ""
	}
	return netip.AddrPortFrom(vmtest.Loopback4, pa), netip.AddrPortFrom(loopbackPeer, pb), ""
}

func (d *driver) timeout() time.Duration { return d.cfg.Warm + d.cfg.Window + 90*time.Second }

func (d *driver) runOnce(pr pairing, w Workload) (outcome, error) {
	if w.Path == PathTCP {
		waited, backlog, err := settleTCP()
		if err != nil {
			return outcome{}, fmt.Errorf("before the run: %w", err)
		}
		d.settle.add(waited, backlog)
		if d.cfg.Verbose && backlog > 0 {
			d.logf("    settled: RDS/TCP held %d bytes from the previous run, drained in %v", backlog, waited.Round(time.Millisecond))
		}
	}
	pa, pb := d.ports()
	a, b, ns := endpoints(w.Path, pa, pb)
	base := Options{Size: w.Size, Batch: max(w.Batch, 1), Depth: max(w.Depth, 1), Warm: d.cfg.Warm, Dur: d.cfg.Window, Spin: w.Spin}
	switch w.Kind {
	case Throughput:
		ro, so := base, base
		ro.Bind, ro.NetNS = a, ns
		so.Bind, so.Peer = b, a
		// Receiver on CPU 1, sender on CPU 0, for both implementations:
		// unbound, the processes and the kernel's RDS work they cause
		// moved between the VM's two CPUs from round to round, and the
		// spread of a workload's rounds was often larger than the gap
		// being measured.
		d.pin, d.pin2 = 1, 0
		defer func() { d.pin, d.pin2 = -1, -1 }()
		return d.pair(pr.main, "recv", &ro, pr.peer, "send", &so, false)
	case Latency:
		// Both ends on one CPU: a wake-up across vCPUs of an emulated
		// VM waits for the host to run the other vCPU's thread, which
		// on a busy host made whole rounds take milliseconds per round
		// trip for either implementation.
		d.pin = 0
		defer func() { d.pin = -1 }()
		eo, po := base, base
		eo.Bind, eo.NetNS = a, ns
		po.Bind, po.Peer = b, a
		out, err := d.pair(pr.peer, "echo", &eo, pr.main, "ping", &po, true)
		// The measuring side is the ping client.
		out.main, out.peer = out.peer, nil
		return out, err
	case RDMA:
		io_, to := base, base
		io_.Bind, io_.Peer = a, b
		to.Bind, to.Peer = b, a
		return d.rdma(pr, &io_, &to)
	}
	return outcome{}, fmt.Errorf("unknown workload kind %d", w.Kind)
}

// pair starts the first role, waits until it is READY, starts the second,
// and waits for a RESULT from the first (or, with resultFromSecond, from the
// second); the survivor is killed afterwards.
func (d *driver) pair(im1 impl, role1 string, o1 *Options, im2 impl, role2 string, o2 *Options, resultFromSecond bool) (out outcome, err error) {
	// The measuring side is the one whose RESULT counts.
	out.cpu = new(cpuWindow)
	mainIdx, mark1, mark2 := [2]int{0, 1}, out.cpu.mark, (func(string))(nil)
	if resultFromSecond {
		mainIdx, mark1, mark2 = [2]int{1, 0}, nil, out.cpu.mark
	}
	p1, err := d.startMarked(im1, role1, o1, mark1)
	if err != nil {
		return outcome{}, err
	}
	defer p1.kill()
	out.cpu.setPID(mainIdx[0], p1.cmd.Process.Pid)
	if err := p1.waitReady(60 * time.Second); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", role1, err)
	}
	if d.pin2 >= 0 {
		pin := d.pin
		d.pin = d.pin2
		defer func() { d.pin = pin }()
	}
	p2, err := d.startMarked(im2, role2, o2, mark2)
	if err != nil {
		return outcome{}, err
	}
	defer p2.kill()
	out.cpu.setPID(mainIdx[1], p2.cmd.Process.Pid)
	if resultFromSecond {
		out.peer, err = p2.waitResult(d.timeout())
		if err != nil {
			return out, fmt.Errorf("%s: %w", role2, err)
		}
		return out, nil
	}
	out.main, err = p1.waitResult(d.timeout())
	if err != nil {
		return out, fmt.Errorf("%s: %w", role1, err)
	}
	out.peer = p2.lastResult()
	return out, nil
}

// rdma starts the initiator, then the target (which registers its region
// and sends the cookie), and waits for the initiator's RESULT.
func (d *driver) rdma(pr pairing, io_, to *Options) (outcome, error) {
	cpu := new(cpuWindow)
	pi, err := d.startMarked(pr.main, "rdma-init", io_, cpu.mark)
	if err != nil {
		return outcome{}, err
	}
	defer pi.kill()
	cpu.setPID(0, pi.cmd.Process.Pid)
	if err := pi.waitReady(60 * time.Second); err != nil {
		return outcome{}, fmt.Errorf("rdma-init: %w", err)
	}
	pt, err := d.start(pr.peer, "rdma-target", to)
	if err != nil {
		return outcome{}, err
	}
	defer pt.kill()
	cpu.setPID(1, pt.cmd.Process.Pid)
	if err := pt.waitReady(90 * time.Second); err != nil {
		return outcome{}, fmt.Errorf("rdma-target: %w", err)
	}
	res, err := pi.waitResult(d.timeout())
	if err != nil {
		return outcome{}, fmt.Errorf("rdma-init: %w", err)
	}
	return outcome{main: res, cpu: cpu}, nil
}

// longWarm is the traffic before the long run's window: long enough for
// the receivers to have run every code path (each first run faults in
// pages of the binary, which count in RSS).
const longWarm = 5 * time.Second

// longRun runs a C and a Go receiver at once for LongRun, each fed by a
// sender of its own kind over RDS/TCP with timestamps on, and records
// their resident memory.
func (d *driver) longRun(rep *Report) {
	const name = "tput tcp 64B ts"
	d.logf("long run: C and Go receivers side by side for %v (%s)", d.cfg.LongRun, name)
	type res struct {
		r   Result
		err error
	}
	results := make([]res, 2)
	var wg sync.WaitGroup
	for k, im := range d.impls {
		pa, pb := d.ports()
		a, b, ns := endpoints(PathTCP, pa, pb)
		ro := Options{Bind: a, NetNS: ns, Size: 64, Batch: 1, Depth: 1, Warm: longWarm, Dur: d.cfg.LongRun, TS: true}
		so := Options{Bind: b, Peer: a, Size: 64, Batch: 1, Depth: 1, Warm: longWarm, Dur: d.cfg.LongRun}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p1, err := d.start(im, "recv", &ro)
			if err != nil {
				results[k].err = err
				return
			}
			defer p1.kill()
			if err := p1.waitReady(60 * time.Second); err != nil {
				results[k].err = err
				return
			}
			p2, err := d.start(im, "send", &so)
			if err != nil {
				results[k].err = err
				return
			}
			defer p2.kill()
			results[k].r, results[k].err = p1.waitResult(d.cfg.LongRun + 2*time.Minute)
		}()
	}
	wg.Wait()
	for k, im := range d.impls {
		if err := results[k].err; err != nil {
			msg := fmt.Sprintf("long run %s: %v", im.name, err)
			d.logf("  %s", msg)
			rep.Failures = append(rep.Failures, msg)
			continue
		}
		r := results[k].r
		x := RSS{Impl: im.name, Workload: name, Seconds: r["secs"], Msgs: uint64(r["msgs"]), Allocs: uint64(r["allocs"]),
			StartKiB: int64(r["rss_start_kib"]), EndKiB: int64(r["rss_end_kib"]), MaxKiB: int64(r["rss_max_kib"]), ControlMsg: uint64(r["cmsgs"]),
			AnonStart: int64(r["anon_start_kib"]), AnonEnd: int64(r["anon_end_kib"]),
			At10s: int64(r["rss_10s_kib"]), Anon10s: int64(r["anon_10s_kib"])}
		if t, ok := r["threads_start"]; ok {
			x.Threads = [2]int64{int64(t), int64(r["threads_end"])}
		}
		rep.RSS = append(rep.RSS, x)
		d.logf("long run %s: %d messages in %.0fs, RSS %d -> %d (10 s) -> %d KiB (max %d), anonymous %d -> %d -> %d KiB, threads %v, %d control messages parsed",
			im.name, x.Msgs, x.Seconds, x.StartKiB, x.At10s, x.EndKiB, x.MaxKiB, x.AnonStart, x.Anon10s, x.AnonEnd, x.Threads, x.ControlMsg)
		if k == 1 {
			rep.Allocs = append(rep.Allocs, Alloc{Workload: name + " (long run)", Side: "receiver", What: "ReadMsg+cmsg.Parser", Allocs: x.Allocs, Msgs: x.Msgs})
		}
	}
}

// proc is a running worker process whose stdout is scanned for READY and
// RESULT lines.
type proc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	result chan Result
	done   chan struct{}
	mu     sync.Mutex
	last   Result
	stderr bytes.Buffer
	err    error
	echo   func(string)
}

func (d *driver) start(im impl, role string, o *Options) (*proc, error) {
	return d.startMarked(im, role, o, nil)
}

// startMarked starts a worker whose WINDOW and RESULT lines are passed to
// mark (if not nil) as they arrive.
func (d *driver) startMarked(im impl, role string, o *Options, mark func(string)) (*proc, error) {
	var echo func(string)
	if d.cfg.Verbose {
		echo = func(line string) { d.logf("    %s %s: %s", im.name, role, line) }
	}
	return startProc(im.bin, im.args(role, o), echo, mark, d.pin)
}

// startProc starts bin; echo, if not nil, sees every output line but READY;
// mark, if not nil, sees the WINDOW and RESULT lines, in the goroutine that
// reads them and before a RESULT is handed on. With cpu >= 0 the process
// is started bound to that CPU: the affinity of the forking thread is
// inherited by the child and all its threads.
func startProc(bin string, args []string, echo, mark func(string), cpu int) (*proc, error) {
	return startProcEnv(bin, args, nil, echo, mark, cpu)
}

// startProcEnv is startProc with env (NAME=VALUE) added to the process's
// environment.
func startProcEnv(bin string, args, env []string, echo, mark func(string), cpu int) (*proc, error) {
	p := &proc{ready: make(chan struct{}), result: make(chan Result, 4), done: make(chan struct{}), echo: echo}
	p.cmd = exec.Command(bin, args...)
	// A group of its own, which kill ends whole: a tool's forked tasks,
	// and the tool itself when it runs under perf.
	p.cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = &limitedWriter{w: &p.stderr, n: 4096}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := startPinned(p.cmd, cpu); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		readyOnce := false
		for sc.Scan() {
			line := sc.Text()
			if p.echo != nil && line != "READY" {
				p.echo(line)
			}
			if line == "READY" && !readyOnce {
				readyOnce = true
				close(p.ready)
				continue
			}
			if line == "WINDOW" && mark != nil {
				mark(line)
			}
			if r, ok := ParseResult(line); ok {
				if mark != nil {
					mark(line)
				}
				p.mu.Lock()
				p.last = r
				p.mu.Unlock()
				select {
				case p.result <- r:
				default:
				}
			}
		}
		p.err = p.cmd.Wait()
	}()
	return p, nil
}

func (p *proc) exitError() error {
	msg := strings.TrimSpace(p.stderr.String())
	if p.err == nil {
		return fmt.Errorf("exited without a result: %s", msg)
	}
	return fmt.Errorf("%v: %s", p.err, msg)
}

func (p *proc) waitReady(d time.Duration) error {
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return p.exitError()
	case <-time.After(d):
		return fmt.Errorf("not ready within %v", d)
	}
}

func (p *proc) waitResult(d time.Duration) (Result, error) {
	select {
	case r := <-p.result:
		return r, nil
	case <-p.done:
		select {
		case r := <-p.result:
			return r, nil
		default:
		}
		return nil, p.exitError()
	case <-time.After(d):
		return nil, fmt.Errorf("no result within %v", d)
	}
}

func (p *proc) lastResult() Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	// The whole group: a process left alive would hold the output pipe
	// that done waits for (perf's child, once perf is killed, does).
	_ = unix.Kill(-p.cmd.Process.Pid, unix.SIGKILL)
	<-p.done
}

func startPinned(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("bind to CPU %d: %w", cpu, err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.w.Write(b[:k])
		l.n -= k
	}
	return len(b), nil
}
