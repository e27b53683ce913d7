//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"

	"github.com/go-rds/rds/cmd/rdscat/internal/cli"
	"github.com/go-rds/rds/cmd/rdscat/internal/scripttest"
	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

// rdscatAsMain is the environment variable that turns this test binary into
// rdscat: the VM has no Go toolchain to build the command, so the tests run
// their own executable, under the name rdscat, as a separate process with
// real arguments, standard streams and exit codes.
const rdscatAsMain = "RDSCAT_AS_MAIN"

func init() {
	if os.Getenv(rdscatAsMain) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// warmOnce brings the topology's RDS/TCP connections fully up once per test
// binary (rdssock.WarmUp), before the first test that needs the VM: Linux up
// to 6.12 can lose messages sent while a new RDS/TCP connection sets up its
// paths, which would make any test's first messages flaky.
var warmOnce = sync.OnceValue(func() error {
	for _, p := range [][2]netip.Addr{{vmtest.TCPLocal4, vmtest.TCPPeer4}, {vmtest.TCPLocal6, vmtest.TCPPeer6}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := rdssock.WarmUp(ctx, p[0], p[1], nil)
		cancel()
		if err != nil {
			return fmt.Errorf("warming up RDS/TCP %v -> %v: %w", p[0], p[1], err)
		}
	}
	return nil
})

// requireVM fails the test outside the rdsvm VM (vmtest.Require: it never
// skips) and warms the RDS/TCP connections up once per test binary.
func requireVM(t *testing.T) {
	t.Helper()
	vmtest.Require(t)
	if err := warmOnce(); err != nil {
		t.Fatal(err)
	}
}

// rdscatSetup puts an rdscat command (this test binary) first on the
// script's PATH and defines the topology variables the scripts use.
func rdscatSetup(t *testing.T) func(*testscript.Env) error {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "rdscat")); err != nil {
		t.Fatal(err)
	}
	return func(e *testscript.Env) error {
		e.Setenv("PATH", bin+string(os.PathListSeparator)+e.Getenv("PATH"))
		e.Setenv(rdscatAsMain, "1")
		e.Setenv("PEERNS", vmtest.PeerNamespaceName)
		e.Setenv("TCP1", vmtest.TCPLocal4.String())
		e.Setenv("TCP2", vmtest.TCPPeer4.String())
		e.Setenv("TCP6_1", vmtest.TCPLocal6.String())
		e.Setenv("TCP6_2", vmtest.TCPPeer6.String())
		e.Setenv("IB1", vmtest.IBAddr1.String())
		e.Setenv("IB2", vmtest.IBAddr2.String())
		return nil
	}
}

// rdscatWarmConnections brings up the RDS connections the scripts share
// before they run in parallel, with rdscat ping itself. On 6.1, while
// several processes set up the same RDS/TCP or RDS/IB connection at once,
// a data message that the sender's kernel reported acknowledged was
// sometimes never delivered (no drop counter moved), even after rdscat's
// own warm-up ping; once a connection is up, nothing was lost. See
// rdscat send -h (-warmup).
func rdscatWarmConnections(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{
		{vmtest.TCPLocal4.String(), vmtest.TCPPeer4.String()},
		{vmtest.TCPLocal6.String(), vmtest.TCPPeer6.String()},
		{vmtest.TCPLocal4.String(), vmtest.TCPLocal4.String()},
		{vmtest.IBAddr1.String(), vmtest.IBAddr2.String()},
	} {
		cmd := exec.Command(exe, "ping", "-c", "3", "-i", "300ms", "-from", p[0], p[1])
		cmd.Env = append(os.Environ(), rdscatAsMain+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rdscat ping -from %s %s: %v\n%s", p[0], p[1], err, out)
		}
	}
	time.Sleep(time.Second) // let the multipath TCP connections settle
}

// TestIntegrationRdscatScripts runs rdscat's real-kernel scripts
// (cmd/rdscat/internal/scripttest/kernel/*.txtar): listen/send round trips
// with exact bytes across namespaces, over IPv6, loopback and Soft-RoCE; ping
// with replies; info tables holding the live connection; stress in both modes
// with the receiver's counts checked; errors with their exit codes.
func TestIntegrationRdscatScripts(t *testing.T) {
	requireVM(t)
	rdscatWarmConnections(t)
	dir := t.TempDir()
	if err := scripttest.WriteKernelScripts(dir); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:   dir,
		Setup: rdscatSetup(t),
		Cmds:  scripttest.Cmds(),
	})
}

// rdscatCmd returns a command running rdscat (this test binary) with args.
func rdscatCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), rdscatAsMain+"=1")
	return cmd
}

// waitReady waits until rdscat's -ready file names the bound address.
func waitReady(t *testing.T, name string, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(name); err == nil && len(b) > 0 {
			return
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("%v: no ready file within 30s; stderr:\n%s", cmd.Args, stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stressJSON is the part of rdscat stress -json the tests read.
type stressJSON struct {
	Sender *struct {
		Mode            string  `json:"mode"`
		Transport       string  `json:"transport"`
		Size            int     `json:"size"`
		Sent            uint64  `json:"sent"`
		SentBytes       uint64  `json:"sent_bytes"`
		Acked           uint64  `json:"acked"`
		ReceiverCounted uint64  `json:"receiver_counted"`
		CountsMatch     bool    `json:"counts_match"`
		Errors          uint64  `json:"errors"`
		MBPerSec        float64 `json:"mb_per_sec"`
		Latency         *struct {
			Count     uint64  `json:"count"`
			P50       float64 `json:"p50"`
			P99       float64 `json:"p99"`
			Histogram []struct {
				Low   float64 `json:"low"`
				High  float64 `json:"high"`
				Count uint64  `json:"count"`
			} `json:"histogram"`
		} `json:"latency_us"`
		RDMA *struct {
			Op                   string            `json:"op"`
			Size                 int               `json:"size"`
			Verify               bool              `json:"verify"`
			Status               map[string]uint64 `json:"status"`
			Verified             uint64            `json:"verified"`
			VerifyErrors         uint64            `json:"verify_errors"`
			ReceiverVerifyErrors uint64            `json:"receiver_verify_errors"`
			Registrations        uint64            `json:"registrations"`
		} `json:"rdma"`
	} `json:"sender"`
	Receiver *struct {
		Transport     string   `json:"transport"`
		Ports         int      `json:"ports"`
		PerPort       []uint64 `json:"received_per_port"`
		Received      uint64   `json:"received"`
		ReceivedBytes uint64   `json:"received_bytes"`
		TasksFinished int      `json:"tasks_finished"`
		SeqErrors     uint64   `json:"seq_errors"`
		Foreign       uint64   `json:"foreign"`
		RDMA          *struct {
			Tasks         int    `json:"tasks"`
			Buffers       uint64 `json:"buffers"`
			Registrations uint64 `json:"registrations"`
			Verified      uint64 `json:"verified"`
			VerifyErrors  uint64 `json:"verify_errors"`
			Bogus         uint64 `json:"bogus"`
			Rejected      uint64 `json:"rejected"`
		} `json:"rdma"`
	} `json:"receiver"`
}

func decodeStress(t *testing.T, what string, b []byte) stressJSON {
	t.Helper()
	var v stressJSON
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b)
	}
	return v
}

// TestRdscatStressRDMA runs rdscat stress in RDMA mode over Soft-RoCE
// (both IB addresses on the one rxe device), receiver and sender as
// separate processes, for WRITE and READ with data verification: every
// operation completes with success, the receiver counts exactly the
// sender's completed operations and bytes, the receiver's buffers were
// registered once at warm-up (registrations equal buffers), the sender
// registered nothing, and every transfer's bytes were checked (by the
// receiver for WRITE, by the sender for READ). WRITE runs with -ports 2,
// a receiving socket per task, each counting its task's operations.
func TestRdscatStressRDMA(t *testing.T) {
	requireVM(t)
	const tasks, depth = 2, 4
	for i, op := range []string{"write", "read"} {
		t.Run(op, func(t *testing.T) {
			port := 4820 + 2*i
			ports := map[string]string{"write": "2", "read": "1"}[op]
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready")
			var rout, rerr bytes.Buffer
			recv := rdscatCmd(t, "stress", "-rdma", op, "-listen", fmt.Sprintf("%v:%d", vmtest.IBAddr2, port), "-ports", ports, "-once", "-json", "-timeout", "60s", "-ready", ready)
			recv.Stdout, recv.Stderr = &rout, &rerr
			if err := recv.Start(); err != nil {
				t.Fatal(err)
			}
			defer recv.Process.Kill()
			waitReady(t, ready, recv, &rerr)

			sj, rj, out := stressEnds(t, recv, &rout, &rerr, "stress", "-rdma", op, "-rdma-size", "8k", "-verify",
				"-to", fmt.Sprintf("%v:%d", vmtest.IBAddr2, port), "-from", vmtest.IBAddr1.String(),
				"-tasks", fmt.Sprint(tasks), "-ports", ports, "-depth", fmt.Sprint(depth), "-duration", "3s", "-timeout", "30s", "-json")
			sr, rr := sj.Sender, rj.Receiver
			if sr == nil || sr.RDMA == nil || rr == nil || rr.RDMA == nil {
				t.Fatalf("summaries without their RDMA parts:\n%s", out)
			}
			t.Logf("%s: %d ops, %d bytes, %.2f MB/s, p50 %.0f µs, p99 %.0f µs; receiver %+v",
				sr.Mode, sr.Sent, sr.SentBytes, sr.MBPerSec, sr.Latency.P50, sr.Latency.P99, *rr.RDMA)
			check := func(what string, got, want any) {
				t.Helper()
				if got != want {
					t.Errorf("%s = %v, want %v", what, got, want)
				}
			}
			check("sender mode", sr.Mode, "rdma-"+op)
			check("sender transport", sr.Transport, "infiniband")
			check("receiver transport", rr.Transport, "infiniband")
			if sr.Sent < 10 {
				t.Errorf("only %d operations in 3 s", sr.Sent)
			}
			check("completed (acked)", sr.Acked, sr.Sent)
			check("receiver_counted", sr.ReceiverCounted, sr.Sent)
			check("counts_match", sr.CountsMatch, true)
			check("sent_bytes", sr.SentBytes, sr.Sent*8192)
			check("errors", sr.Errors, uint64(0))
			check("status map", fmt.Sprint(sr.RDMA.Status), fmt.Sprintf("map[success:%d]", sr.Sent))
			check("latency samples", sr.Latency.Count, sr.Sent)
			check("sender registrations", sr.RDMA.Registrations, uint64(0))
			check("receiver received", rr.Received, sr.Sent)
			check("receiver received_bytes", rr.ReceivedBytes, sr.SentBytes)
			check("receiver tasks_finished", rr.TasksFinished, tasks)
			check("receiver seq_errors", rr.SeqErrors, uint64(0))
			check("receiver rdma tasks", rr.RDMA.Tasks, tasks)
			check("receiver buffers", rr.RDMA.Buffers, uint64(tasks*depth))
			check("receiver registrations (warm-up only)", rr.RDMA.Registrations, uint64(tasks*depth))
			check("receiver bogus", rr.RDMA.Bogus, uint64(0))
			if ports == "2" {
				checkPerPort(t, rr.PerPort, 2, rr.Received)
			}
			if op == "write" {
				check("receiver verified", rr.RDMA.Verified, sr.Sent)
				check("receiver verify_errors", rr.RDMA.VerifyErrors, uint64(0))
				check("sender receiver_verify_errors", sr.RDMA.ReceiverVerifyErrors, uint64(0))
			} else {
				check("sender verified", sr.RDMA.Verified, sr.Sent)
				check("sender verify_errors", sr.RDMA.VerifyErrors, uint64(0))
			}
		})
	}
}

// stressEnds runs an rdscat stress sender with args against the receiver
// recv (started, its output going to rout and rerr), waits for both, and
// returns their JSON summaries and both outputs (for messages); either one
// failing fails the test.
func stressEnds(t *testing.T, recv *exec.Cmd, rout, rerr *bytes.Buffer, args ...string) (sender, receiver stressJSON, out string) {
	t.Helper()
	send := rdscatCmd(t, args...)
	var sout, serr bytes.Buffer
	send.Stdout, send.Stderr = &sout, &serr
	sendErr := send.Run()
	recvErr := recv.Wait()
	if sendErr != nil || recvErr != nil {
		t.Fatalf("sender: %v\n%s%s\nreceiver: %v\n%s%s", sendErr, sout.String(), serr.String(), recvErr, rout.String(), rerr.String())
	}
	return decodeStress(t, "sender", sout.Bytes()), decodeStress(t, "receiver", rout.Bytes()), sout.String() + "\n" + rout.String()
}

// checkPerPort checks a receiver's messages per port: n ports, each with
// some, together total.
func checkPerPort(t *testing.T, per []uint64, n int, total uint64) {
	t.Helper()
	var sum uint64
	for _, c := range per {
		if c == 0 {
			t.Errorf("a port received nothing: %v", per)
		}
		sum += c
	}
	if len(per) != n || sum != total {
		t.Errorf("messages per port %v: want %d ports summing to %d", per, n, total)
	}
}

// TestRdscatStressPorts runs an rr stress over RDS/TCP between two
// namespaces with a receiver alone on three ports (-ports 3) and a sender
// whose three tasks each send to one of them: every request is answered,
// counted once, in order, and each port counted its task's requests.
func TestRdscatStressPorts(t *testing.T) {
	requireVM(t)
	const port, ports = 4840, 3
	ready := filepath.Join(t.TempDir(), "ready")
	var rout, rerr bytes.Buffer
	recv := rdscatCmd(t, "stress", "-netns", vmtest.PeerNamespaceName, "-listen", fmt.Sprintf("%v:%d", vmtest.TCPPeer4, port),
		"-ports", fmt.Sprint(ports), "-size", "256", "-once", "-json", "-timeout", "60s", "-ready", ready)
	recv.Stdout, recv.Stderr = &rout, &rerr
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer recv.Process.Kill()
	waitReady(t, ready, recv, &rerr)
	sj, rj, out := stressEnds(t, recv, &rout, &rerr, "stress", "-to", fmt.Sprintf("%v:%d", vmtest.TCPPeer4, port), "-from", vmtest.TCPLocal4.String(),
		"-tasks", fmt.Sprint(ports), "-ports", fmt.Sprint(ports), "-depth", "4", "-size", "256", "-duration", "2s", "-timeout", "30s", "-json")
	sr, rr := sj.Sender, rj.Receiver
	if sr == nil || rr == nil {
		t.Fatalf("summaries without sender or receiver:\n%s", out)
	}
	t.Logf("%d requests answered; per port %v", sr.Acked, rr.PerPort)
	if sr.Sent < 30 || sr.Acked != sr.Sent || !sr.CountsMatch || sr.Errors != 0 {
		t.Errorf("sender: %d sent, %d answered, counts match %v, %d errors", sr.Sent, sr.Acked, sr.CountsMatch, sr.Errors)
	}
	if rr.Received != sr.Sent || rr.TasksFinished != ports || rr.SeqErrors != 0 || rr.Foreign != 0 || rr.Ports != ports {
		t.Errorf("receiver: %d received of %d, %d tasks finished, %d sequence errors, %d foreign, %d ports",
			rr.Received, sr.Sent, rr.TasksFinished, rr.SeqErrors, rr.Foreign, rr.Ports)
	}
	checkPerPort(t, rr.PerPort, ports, rr.Received)
}

// TestRdscatStressRDMANotIB: RDMA mode on an RDS/TCP address fails with
// exit code 3 and says that RDMA needs an IB address, on the receiver
// (checked at bind) and on a sender alone (checked after its warm-up).
func TestRdscatStressRDMANotIB(t *testing.T) {
	requireVM(t)
	for _, args := range [][]string{
		{"-listen", vmtest.TCPLocal4.String() + ":4830"},
		{"-to", vmtest.TCPLocal4.String() + ":4831", "-from", vmtest.TCPLocal4.String(), "-duration", "1s"},
	} {
		cmd := rdscatCmd(t, append([]string{"stress", "-rdma", "write"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("%v: %v, want exit code 3; stderr:\n%s", cmd.Args[1:], err, &stderr)
		}
		if want := "uses the tcp transport: RDMA needs an IB address (RDS_TRANS_IB)"; !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: stderr %q does not say %q", cmd.Args[1:], stderr.String(), want)
		}
	}
}

// openPTY opens a new pseudo-terminal pair: the master through /dev/ptmx,
// unlocked with TIOCSPTLCK, and the slave /dev/pts/N named by TIOCGPTN.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("TIOCSPTLCK: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("TIOCGPTN: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open /dev/pts/%d: %v", n, err)
	}
	return m, s
}

// ttyLine is a line read from the terminal and when it arrived.
type ttyLine struct {
	text string
	at   time.Time
}

// runOnPTY runs rdscat with its stdout on a new pseudo-terminal and
// returns the lines it printed there, each with its arrival time.
func runOnPTY(t *testing.T, args ...string) []ttyLine {
	t.Helper()
	master, slave := openPTY(t)
	defer master.Close()
	cmd := rdscatCmd(t, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = slave, &stderr
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close() // the child holds its own copy
	lines := make(chan []ttyLine, 1)
	go func() {
		var out []ttyLine
		sc := bufio.NewScanner(master)
		for sc.Scan() { // ends with EIO once the child's side is closed
			out = append(out, ttyLine{strings.TrimRight(sc.Text(), "\r"), time.Now()})
		}
		lines <- out
	}()
	err := cmd.Wait()
	var got []ttyLine
	select {
	case got = <-lines:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal did not report end of output")
	}
	if err != nil {
		t.Fatalf("%v: %v\nstderr:\n%s\nterminal:\n%v", args, err, &stderr, got)
	}
	return got
}

// liveLineRE matches stress's per-second line for a run with both ends.
var liveLineRE = regexp.MustCompile(`^ *(\d+)s  sent +(\d+) msg/s +([\d.]+) MB/s  in-flight +(\d+)  congested (\d+)  errors (\d+)  received +(\d+) msg/s +([\d.]+) MB/s$`)

// anyLiveRE matches the start of any live line.
var anyLiveRE = regexp.MustCompile(`^ *\d+s  (sent|received) `)

// TestRdscatLiveLines runs stress with its output on a pseudo-terminal:
// one live line per second appears, numbered 1, 2, 3..., about a second
// apart, with plausible fields (rates that agree with the message size,
// in-flight within the depth, no errors), followed by the summary. The
// same run with output on a pipe, with -q, or with -json on the terminal
// prints no live line.
func TestRdscatLiveLines(t *testing.T) {
	requireVM(t)
	const size, depth = 1024, 4
	args := []string{"stress", "-listen", "127.0.0.1:4850", "-to", "127.0.0.1:4850", "-size", fmt.Sprint(size), "-depth", fmt.Sprint(depth), "-duration", "5s"}
	lines := runOnPTY(t, args...)
	var live []ttyLine
	summary := -1
	for i, l := range lines {
		if liveLineRE.MatchString(l.text) {
			live = append(live, l)
		} else if anyLiveRE.MatchString(l.text) {
			t.Errorf("malformed live line %q", l.text)
		}
		if strings.HasPrefix(l.text, "stress rr: ") && summary < 0 {
			summary = i
		}
	}
	if len(live) < 3 || len(live) > 8 {
		t.Fatalf("%d live lines in a 5 s run, want 3 to 8:\n%v", len(live), lines)
	}
	if summary < 0 || !liveLineRE.MatchString(lines[summary-1].text) {
		t.Errorf("no summary right after the live lines:\n%v", lines)
	}
	busy := 0
	for i, l := range live {
		m := liveLineRE.FindStringSubmatch(l.text)
		num := func(k int) float64 {
			var v float64
			fmt.Sscan(m[k], &v)
			return v
		}
		if int(num(1)) != i+1 {
			t.Errorf("line %d is numbered %s: %q", i+1, m[1], l.text)
		}
		sent, mb, inflight, errs, recv, rmb := num(2), num(3), num(4), num(6), num(7), num(8)
		if want := sent * size / 1e6; mb < want-0.006 || mb > want+0.006 {
			t.Errorf("%q: %.0f msg/s of %d bytes is %.3f MB/s, the line says %.2f", l.text, sent, size, want, mb)
		}
		if want := recv * size / 1e6; rmb < want-0.006 || rmb > want+0.006 {
			t.Errorf("%q: received %.0f msg/s of %d bytes is %.3f MB/s, the line says %.2f", l.text, recv, size, want, rmb)
		}
		if inflight > depth {
			t.Errorf("%q: %v in flight with depth %d", l.text, inflight, depth)
		}
		if errs != 0 {
			t.Errorf("%q: errors", l.text)
		}
		if sent > 0 && recv > 0 {
			busy++
		}
		if i > 0 {
			if gap := l.at.Sub(live[i-1].at); gap < 400*time.Millisecond || gap > 1600*time.Millisecond {
				t.Errorf("line %d came %v after line %d, want about 1 s", i+1, gap, i)
			}
		}
	}
	if busy < 2 {
		t.Errorf("only %d live lines show traffic both ways:\n%v", busy, live)
	}
	t.Logf("%d live lines, e.g. %q", len(live), live[1].text)

	// Not a terminal: a pipe.
	short := []string{"stress", "-listen", "127.0.0.1:4851", "-to", "127.0.0.1:4851", "-duration", "1500ms"}
	out, err := rdscatCmd(t, short...).Output()
	if err != nil {
		t.Fatalf("%v: %v", short, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if anyLiveRE.MatchString(l) {
			t.Errorf("live line %q with output on a pipe", l)
		}
	}
	if !strings.Contains(string(out), "stress rr: ") {
		t.Errorf("no summary on the pipe:\n%s", out)
	}
	// A terminal, but -q, or -json.
	for i, extra := range []string{"-q", "-json"} {
		a := []string{"stress", "-listen", fmt.Sprintf("127.0.0.1:%d", 4852+i), "-to", fmt.Sprintf("127.0.0.1:%d", 4852+i), "-duration", "1500ms", extra}
		var text strings.Builder
		for _, l := range runOnPTY(t, a...) {
			if anyLiveRE.MatchString(l.text) {
				t.Errorf("%s: live line %q", extra, l.text)
			}
			text.WriteString(l.text + "\n")
		}
		if extra == "-json" {
			if v := decodeStress(t, "-json on a terminal", []byte(text.String())); v.Sender == nil || v.Sender.Sent == 0 {
				t.Errorf("-json on a terminal: %s", text.String())
			}
		} else if !strings.Contains(text.String(), "stress rr: ") {
			t.Errorf("-q: no summary:\n%s", text.String())
		}
	}
}
