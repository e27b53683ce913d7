//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

// runTools runs every tool workload Rounds times, the C stress baseline
// and rdscat alternately, and adds its rows to rep.ToolRows.
func (d *driver) runTools(rep *Report) {
	if len(d.cfg.Tools) == 0 {
		return
	}
	if d.cfg.StressC == "" || d.cfg.Rdscat == "" {
		rep.Failures = append(rep.Failures, "tools: Config.StressC and Config.Rdscat are required")
		return
	}
	for _, w := range d.cfg.Tools {
		if w.Example && (d.cfg.Example == "" || d.cfg.abMode()) {
			rep.Failures = append(rep.Failures, "tools: the example rows need Config.Example, and are no A/B rows")
			return
		}
	}
	info, err := rdssock.Listen(netip.AddrPortFrom(vmtest.Loopback4, 0), nil)
	if err != nil {
		rep.Failures = append(rep.Failures, fmt.Sprintf("tools: a socket to read the RDS counters: %v", err))
		return
	}
	defer info.Close()
	// Bring both paths up once, as a user's first run would have.
	for _, p := range [][2]netip.Addr{{vmtest.TCPLocal4, vmtest.TCPPeer4}, {vmtest.IBAddr1, vmtest.IBAddr2}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := rdssock.WarmUp(ctx, p[0], p[1], nil)
		cancel()
		if err != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("tools: warming up %v -> %v: %v", p[0], p[1], err))
		}
	}
	rep.ToolSlack = ToolSetupSlack
	for _, w := range d.cfg.Tools {
		d.runTool(rep, info, w)
	}
}

func (d *driver) runTool(rep *Report, info *rdssock.Conn, w ToolWorkload) {
	name := ToolPrefix + w.Name
	rows := []Row{
		{Workload: w.Name, Metric: w.Unit(), Goal: GoalThroughput},
		{Workload: w.Name, Metric: CPULabel("sender"), Goal: GoalCPU},
		{Workload: w.Name, Metric: CPULabel("receiver"), Goal: GoalCPU},
	}
	var errs []string
	rounds := d.cfg.Rounds
	for r := 0; r < rounds; r++ {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		var line []string
		var got [2]*toolMeasurement
		for _, k := range order {
			impl := d.impls[k].name
			m, err := d.toolOnce(info, w, k == 1)
			if err != nil {
				msg := fmt.Sprintf("%s round %d %s: %v", name, r+1, impl, err)
				d.logf("  %s", msg)
				errs = append(errs, msg)
				rep.Failures = append(rep.Failures, msg)
				continue
			}
			got[k] = &m
			for i, v := range []float64{m.rate, m.cpuSender, m.cpuReceiver} {
				if k == 0 {
					rows[i].C = append(rows[i].C, v)
				} else {
					rows[i].Go = append(rows[i].Go, v)
				}
			}
			line = append(line, fmt.Sprintf("%s %s %s (own report %s), CPU us/msg %s (user %s, switches %.2f+%.2f) + %s (user %s, switches %.2f+%.2f)",
				impl, fmtNum(m.rate), w.Unit(), fmtNum(m.own),
				fmtNum(m.cpuSender), fmtNum(m.useSender[0]), m.useSender[1], m.useSender[2],
				fmtNum(m.cpuReceiver), fmtNum(m.useReceiver[0]), m.useReceiver[1], m.useReceiver[2]))
			if m.calls[0] != "" {
				line[len(line)-1] += fmt.Sprintf(" [per message over the whole run, sender: %s; receiver: %s]", m.calls[0], m.calls[1])
			}
			if d.cfg.Verbose {
				d.logf("    %s: %d sent by its own count, %d by the kernel's over the whole run", impl, m.sent, m.counted)
			}
		}
		if c, g := got[0], got[1]; c != nil && g != nil {
			for i, v := range [][2]float64{{c.rate, g.rate}, {c.cpuSender, g.cpuSender}, {c.cpuReceiver, g.cpuReceiver}} {
				if v[0] > 0 {
					rows[i].Pairs = append(rows[i].Pairs, v[1]/v[0])
				}
			}
		}
		d.logf("%-28s round %d/%d: %s", name, r+1, rounds, strings.Join(line, "; "))
		if r == d.cfg.Rounds-1 && d.cfg.ExtraRounds > 0 && rows[0].noisy(d.cfg.NoisySpread) {
			rounds += d.cfg.ExtraRounds
			d.logf("%-28s spread above %.0f%%: %d more rounds", name, 100*d.cfg.NoisySpread, d.cfg.ExtraRounds)
		}
	}
	if len(errs) > 0 {
		for i := range rows {
			rows[i].Err = strings.Join(errs, "; ")
		}
	}
	if w.Example {
		rep.ExampleRows = append(rep.ExampleRows, rows...)
	} else {
		rep.ToolRows = append(rep.ToolRows, rows...)
	}
}

// toolSide is one process of a tools round, for its failure report.
type toolSide struct {
	p    *proc
	side string
	out  *capture
}

// state tells, for the report of the other side's failure, how this side
// ended (waiting up to wait for it) and what it printed: when one side
// waits for the other in vain, the other's own account is the clue.
func (t toolSide) state(wait time.Duration) string {
	select {
	case <-t.p.done:
	case <-time.After(wait):
		// Its standard error is still being written: only the
		// captured output may be read now.
		return fmt.Sprintf("%s: still running %v later (killed), its output so far:\n%s", t.side, wait, t.out.String())
	}
	how := "exited 0"
	if t.p.err != nil {
		how = t.p.err.Error()
	}
	return fmt.Sprintf("%s: %s, its output:\n%s%s", t.side, how, t.out.String(), strings.TrimSpace(t.p.stderr.String()))
}

// toolMeasurement is one round of one tool.
type toolMeasurement struct {
	rate                   float64    // units per second in the driver's window
	cpuSender, cpuReceiver float64    // microseconds per unit
	own                    float64    // the rate the tool reported itself, over its own interval
	sent                   uint64     // requests, messages or operations the tool says it sent in its whole run
	counted                uint64     // the kernel's count of them over the whole run (see ToolWorkload.Counter)
	useSender, useReceiver [3]float64 // per unit: user CPU us, voluntary and involuntary switches
	calls                  [2]string  // Config.PerfStat: the sender's and the receiver's system calls per message sent
}

// toolOnce runs one tool (rdscat if goTool, or for an example row
// examples/rdmawrite; else the C baseline, or in A/B mode the A build of
// rdscat) on w: the receiver, once bound, then the sender. The window
// opens Warm after the workload's RDS counter first moves and lasts
// Window; at both edges the driver reads the counter and the CPU time of
// both process trees. Both tools must then finish cleanly (every message
// accounted for).
func (d *driver) toolOnce(info *rdssock.Conn, w ToolWorkload, goTool bool) (toolMeasurement, error) {
	var m toolMeasurement
	if w.Path == PathTCP {
		waited, backlog, err := settleTCP()
		if err != nil {
			return m, fmt.Errorf("before the run: %w", err)
		}
		d.settle.add(waited, backlog)
	}
	d.port += uint16(2*w.Tasks + 2)
	firstPort := d.port // the run's ports: firstPort to firstPort+2*w.Tasks+1
	run := toolRun{Receiver: netip.AddrPortFrom(vmtest.IBAddr2, d.port), Sender: vmtest.IBAddr1, Duration: ToolSetupSlack + d.cfg.Warm + d.cfg.Window}
	if d.cfg.Perf != "" {
		run.Duration += ToolSetupSlack // perf starts the tools more slowly
	}
	if w.Path == PathTCP {
		run.Receiver, run.Sender, run.NetNS = netip.AddrPortFrom(vmtest.TCPPeer4, d.port), vmtest.TCPLocal4, vmtest.PeerNamespaceName
	}
	bin := d.cfg.StressC
	recvArgs, sendArgs := w.CArgs(run)
	stem := fmt.Sprintf("%s-%d-", strings.ReplaceAll(w.Name, " ", "_"), d.port) // names a profile or perf file
	// rdscat: this side runs rdscat, the rdscat column's (goTool) or,
	// in A/B mode, A in the C column's place.
	rdscat, env := (goTool || d.cfg.abMode()) && !w.Example, d.cfg.EnvB
	example := goTool && w.Example
	name := "C"
	switch {
	case example:
		bin, name = d.cfg.Example, "example"
		recvArgs, sendArgs = w.ExampleArgs(run)
	case rdscat:
		name = "rdscat"
	}
	if rdscat {
		bin = d.cfg.Rdscat
		if !goTool {
			env = d.cfg.EnvA
			if d.cfg.ABRdscat != "" {
				bin = d.cfg.ABRdscat
			}
		}
		run.Ready = filepath.Join(os.TempDir(), fmt.Sprintf("rdsbench-ready-%d", d.port))
		_ = os.Remove(run.Ready)
		defer os.Remove(run.Ready)
		recvArgs, sendArgs = w.RdscatArgs(run)
		if dir := d.cfg.ProfileDir; dir != "" {
			base := filepath.Join(dir, stem)
			recvArgs = append(recvArgs, "-cpuprofile", base+"receiver.pprof")
			sendArgs = append(sendArgs, "-cpuprofile", base+"sender.pprof")
		}
	}
	recvBin, sendBin := bin, bin
	var statOut [2]string // PerfStat's files, sender and receiver
	if d.cfg.Perf != "" {
		tool := strings.ToLower(d.impls[0].name)
		if goTool {
			tool = strings.ToLower(d.impls[1].name)
		}
		base := filepath.Join(d.cfg.PerfDir, stem+tool+"-")
		perf, ext := PerfRecord, ".data"
		if d.cfg.PerfSwitches {
			perf = PerfSwitches
		}
		if d.cfg.PerfStat {
			perf, ext = PerfStat, ".stat"
			statOut = [2]string{base + "sender" + ext, base + "receiver" + ext}
		}
		recvBin, recvArgs = perf(d.cfg.Perf, base+"receiver"+ext, bin, recvArgs)
		sendBin, sendArgs = perf(d.cfg.Perf, base+"sender"+ext, bin, sendArgs)
	}
	var recvOut, sendOut capture
	pr, err := startProcEnv(recvBin, recvArgs, env, d.capture(&recvOut, name, "receiver"), nil, -1)
	if err != nil {
		return m, err
	}
	defer pr.kill()
	switch {
	case rdscat:
		err = waitFile(pr, run.Ready, time.Minute)
	case example:
		err = waitBound(pr, info, run.Receiver, time.Minute)
	default:
		err = pr.waitReady(time.Minute)
	}
	if err != nil {
		return m, fmt.Errorf("receiver: %w", err)
	}
	counter, per := w.Counter()
	read := func() (uint64, error) { return counterValue(info, counter) }
	c0, err := read()
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	ps, err := startProcEnv(sendBin, sendArgs, env, d.capture(&sendOut, name, "sender"), nil, -1)
	if err != nil {
		return m, err
	}
	defer ps.kill()

	// The window opens Warm after the traffic starts.
	for {
		c, err := read()
		if err != nil {
			return m, err
		}
		if c != c0 {
			break
		}
		select {
		case <-ps.done:
			return m, fmt.Errorf("sender: %w\n%s", ps.exitError(), sendOut.String())
		case <-pr.done:
			return m, fmt.Errorf("receiver: %w\n%s", pr.exitError(), recvOut.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Since(t0) > time.Minute {
			return m, fmt.Errorf("no %s within a minute of starting the sender", counter)
		}
	}
	time.Sleep(d.cfg.Warm)
	sample := func() (ToolSample, error) {
		c, err := read()
		if err != nil {
			return ToolSample{}, err
		}
		t, err := cpuTicks(ps.cmd.Process.Pid, pr.cmd.Process.Pid)
		if err != nil {
			return ToolSample{}, fmt.Errorf("CPU time: %w", err)
		}
		use, err := schedUse(ps.cmd.Process.Pid, pr.cmd.Process.Pid)
		if err != nil {
			return ToolSample{}, fmt.Errorf("scheduling use: %w", err)
		}
		return ToolSample{At: time.Now(), Count: c, Sender: t[0], Receiver: t[1], SenderUse: use[0], ReceiverUse: use[1]}, nil
	}
	a, err := sample()
	if err != nil {
		return m, err
	}
	time.Sleep(d.cfg.Window)
	b, err := sample()
	if err != nil {
		return m, err
	}
	if late := b.At.Sub(t0); late > run.Duration {
		return m, fmt.Errorf("the window ended %v after the sender started, past its %v run: the start took longer than ToolSetupSlack", late.Round(time.Millisecond), run.Duration)
	}
	sides := []toolSide{{ps, "sender", &sendOut}, {pr, "receiver", &recvOut}}
	for i, p := range sides {
		select {
		case <-p.p.done:
		case <-time.After(run.Duration + 90*time.Second):
			return m, fmt.Errorf("%s did not finish", p.side)
		}
		if p.p.err != nil {
			err := fmt.Errorf("%s: %v\n%s%s\n%s", p.side, p.p.err, p.out.String(), strings.TrimSpace(p.p.stderr.String()), sides[1-i].state(2*time.Second))
			if w.Path == PathTCP {
				err = fmt.Errorf("%w\n%s", err, stuckMessages(firstPort, firstPort+uint16(2*w.Tasks+1)))
			}
			return m, err
		}
	}
	switch {
	case rdscat:
		s, err := ParseStressSummary(sendOut.String())
		if err != nil || s.Sender == nil {
			return m, fmt.Errorf("rdscat sender's summary: %v\n%s", err, sendOut.String())
		}
		m.own, m.sent = s.Sender.MsgsPerSec, s.Sender.Sent
	case example:
		if m.own, m.sent, err = ParseExampleResult(sendOut.String()); err != nil {
			return m, fmt.Errorf("%w\n%s", err, sendOut.String())
		}
	default:
		res := ps.lastResult()
		if res == nil {
			return m, fmt.Errorf("the C sender printed no RESULT\n%s", sendOut.String())
		}
		m.own, m.sent = res["rate"], uint64(res["sent"])
	}
	cEnd, err := read()
	if err != nil {
		return m, err
	}
	m.counted = uint64(float64(cEnd-c0) / per)
	// RDMA operations are counted by the kernel exactly once each, and
	// neither tool issues any other: the kernel's count over the run must
	// be the tool's. (Requests and messages come with a few protocol
	// messages of each tool: hellos, pings, counts.)
	if w.RDMA() && m.counted != m.sent {
		return m, fmt.Errorf("the kernel counted %d RDMA operations (%s) over the run, the tool says it issued %d", m.counted, counter, m.sent)
	}
	m.rate, m.cpuSender, m.cpuReceiver, err = ToolMeasure(w, a, b)
	units := float64(b.Count-a.Count) / per
	m.useSender[0], m.useSender[1], m.useSender[2] = b.SenderUse.PerUnit(a.SenderUse, units)
	m.useReceiver[0], m.useReceiver[1], m.useReceiver[2] = b.ReceiverUse.PerUnit(a.ReceiverUse, units)
	if err == nil && statOut[0] != "" {
		for i, f := range statOut {
			out, rerr := os.ReadFile(f)
			var counts map[string]uint64
			if rerr == nil {
				counts, rerr = ParsePerfStat(out)
			}
			if rerr != nil {
				return m, fmt.Errorf("perf stat: %w", rerr)
			}
			m.calls[i] = PerMessage(counts, m.sent)
		}
	}
	return m, err
}

// capture collects a process's output lines.
type capture struct {
	mu sync.Mutex
	sb strings.Builder
}

func (c *capture) add(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sb.Len() < 64<<10 {
		c.sb.WriteString(line + "\n")
	}
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sb.String()
}

func (d *driver) capture(c *capture, name, side string) func(string) {
	return func(line string) {
		c.add(line)
		if d.cfg.Verbose {
			d.logf("    %s %s: %s", name, side, line)
		}
	}
}

// waitFile waits until p has written path (rdscat -ready).
func waitFile(p *proc, path string, limit time.Duration) error {
	return pollFor(p, limit, path, func() (bool, error) {
		b, err := os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n"), nil
	})
}

// waitBound waits until an RDS socket is bound to addr (the example's
// passive side, which announces nothing), as RDS_INFO_SOCKETS lists them.
func waitBound(p *proc, info *rdssock.Conn, addr netip.AddrPort, limit time.Duration) error {
	return pollFor(p, limit, "socket bound to "+addr.String(), func() (bool, error) {
		socks, err := info.Sockets()
		return slices.ContainsFunc(socks, func(s rdssock.SocketInfo) bool { return s.Bound == addr }), err
	})
}

// pollFor asks ready every 10 ms until it says so or fails, p exits, or
// limit passes; what names the awaited thing.
func pollFor(p *proc, limit time.Duration, what string, ready func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		if ok, err := ready(); ok || err != nil {
			return err
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %v", what, limit)
		}
	}
}

// counterValue reads one of the kernel's RDS counters.
func counterValue(c *rdssock.Conn, name string) (uint64, error) {
	cs, err := c.Counters()
	if err != nil {
		return 0, err
	}
	for _, x := range cs {
		if x.Name == name {
			return x.Value, nil
		}
	}
	return 0, errors.New("the kernel has no RDS counter " + name)
}
