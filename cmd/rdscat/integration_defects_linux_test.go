//go:build integration

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

// lockedBuffer is a bytes.Buffer a child process writes to while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// exitCode returns the exit code of a finished command's error (0 for nil,
// -1 for an error that is not an exit status).
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// TestRdscatStressListenerRunsUntilInterrupted: "rdscat stress -listen"
// alone, without -duration, serves one sender run of 6 s (longer than
// -duration's default of 5 s, which once stopped it) with every request
// answered, then a second run, and exits 0 with both runs counted only
// when interrupted. With an explicit -duration a receiver alone stops by
// itself.
func TestRdscatStressListenerRunsUntilInterrupted(t *testing.T) {
	requireVM(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	addr := fmt.Sprintf("%v:4860", vmtest.TCPPeer4)
	var rout bytes.Buffer
	var rerr lockedBuffer
	recv := rdscatCmd(t, "stress", "-netns", vmtest.PeerNamespaceName, "-listen", addr, "-json", "-ready", ready)
	recv.Stdout, recv.Stderr = &rout, &rerr
	start := time.Now()
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer recv.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- recv.Wait() }()
	waitFile(t, ready, 30*time.Second)

	var sent uint64
	for i, d := range []string{"6s", "2s"} {
		send := rdscatCmd(t, "stress", "-to", addr, "-from", vmtest.TCPLocal4.String(), "-tasks", "2", "-depth", "4", "-duration", d, "-json")
		var sout, serr bytes.Buffer
		send.Stdout, send.Stderr = &sout, &serr
		if err := send.Run(); err != nil {
			t.Fatalf("sender run %d (-duration %s): %v\n%s%s\nreceiver: %s", i+1, d, err, sout.String(), serr.String(), rerr.String())
		}
		sr := decodeStress(t, "sender", sout.Bytes()).Sender
		if sr == nil || sr.Sent == 0 || sr.Acked != sr.Sent || !sr.CountsMatch || sr.Errors != 0 {
			t.Fatalf("sender run %d: %s", i+1, sout.String())
		}
		var secs float64
		if m := regexp.MustCompile(`"seconds": ([\d.]+)`).FindSubmatch(sout.Bytes()); m != nil {
			secs, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		want, _ := time.ParseDuration(d)
		if secs < want.Seconds()-0.2 {
			t.Errorf("sender run %d lasted %.2f s, want about %v", i+1, secs, want)
		}
		t.Logf("sender run %d: %d requests, all %d answered, %.0f msg/s over %.2f s; receiver up %.1f s so far",
			i+1, sr.Sent, sr.Acked, float64(sr.Sent)/secs, secs, time.Since(start).Seconds())
		sent += sr.Sent
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-exited:
		t.Fatalf("the receiver exited on its own after %v (%v): %s", time.Since(start), err, rerr.String())
	default:
	}
	alive := time.Since(start)
	if err := recv.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("receiver after SIGINT: %v\n%s%s", err, rout.String(), rerr.String())
	}
	rr := decodeStress(t, "receiver", rout.Bytes()).Receiver
	if rr == nil || rr.Received != sent || rr.TasksFinished != 4 || rr.SeqErrors != 0 {
		t.Fatalf("receiver after two runs of %d requests in all: %s", sent, rout.String())
	}
	// The old receiver stopped after the 5 s default -duration; this one
	// was still up after both sender runs, the first of them 6 s long.
	if alive < 6*time.Second {
		t.Errorf("receiver was up only %v before SIGINT, want at least the first run's 6 s", alive)
	}
	t.Logf("receiver without -duration ran %.1f s until SIGINT, counted %d of %d requests over 2 runs, 4 tasks finished", alive.Seconds(), rr.Received, sent)

	// An explicit -duration stops a receiver alone.
	explicit := rdscatCmd(t, "stress", "-listen", fmt.Sprintf("%v:4861", vmtest.TCPLocal4), "-duration", "2s", "-json")
	var eout, eerr bytes.Buffer
	explicit.Stdout, explicit.Stderr = &eout, &eerr
	t0 := time.Now()
	done := make(chan error, 1)
	if err := explicit.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- explicit.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("receiver -duration 2s: %v\n%s", err, eerr.String())
		}
	case <-time.After(30 * time.Second):
		explicit.Process.Kill()
		t.Fatal("a receiver with -duration 2s still ran after 30 s")
	}
	if d := time.Since(t0); d < 2*time.Second {
		t.Errorf("a receiver with -duration 2s stopped after %v", d)
	} else {
		t.Logf("receiver with -duration 2s stopped by itself after %.1f s", d.Seconds())
	}
}

// waitFile waits until the file name exists and is not empty.
func waitFile(t *testing.T, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b, err := os.ReadFile(name); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", name, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRdscatBufferFlags: -sndbuf and -rcvbuf take sizes such as 8m, and
// the value reaches the socket: 1 MiB messages go through with -sndbuf 8m
// (the kernel allows about half of the send buffer per message) and are
// refused as too long with -sndbuf 64k.
func TestRdscatBufferFlags(t *testing.T) {
	requireVM(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	var lout bytes.Buffer
	var lerr lockedBuffer
	listen := rdscatCmd(t, "listen", "-rcvbuf", "8m", "-sndbuf", "8m", "-size", "1m", "-raw", "-count", "2", "-timeout", "60s", "-ready", ready, "127.0.0.1:4870")
	listen.Stdout, listen.Stderr = &lout, &lerr
	if err := listen.Start(); err != nil {
		t.Fatal(err)
	}
	defer listen.Process.Kill()
	waitFile(t, ready, 30*time.Second)
	send := rdscatCmd(t, "send", "-sndbuf", "8m", "-rcvbuf", "8m", "-fill", "1m", "-count", "2", "-from", "127.0.0.1", "127.0.0.1:4870")
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send -sndbuf 8m -rcvbuf 8m -fill 1m: %v\n%s", err, out)
	}
	if err := listen.Wait(); err != nil {
		t.Fatalf("listen -rcvbuf 8m: %v\n%s", err, lerr.String())
	}
	if lout.Len() != 2<<20 {
		t.Fatalf("listener printed %d bytes, want two messages of 1 MiB", lout.Len())
	}
	small := rdscatCmd(t, "send", "-sndbuf", "64k", "-fill", "1m", "-from", "127.0.0.1", "127.0.0.1:4871")
	out, err := small.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "message too long") {
		t.Fatalf("send -sndbuf 64k -fill 1m: %v, want exit 1 and message too long:\n%s", err, out)
	}
	t.Logf("-sndbuf 8m -rcvbuf 8m: two 1 MiB messages delivered; -sndbuf 64k: %s", firstLine(out))
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// hostCounter reads one of the kernel's RDS counters (global to the host).
func hostCounter(t *testing.T, name string) uint64 {
	t.Helper()
	c, err := rdssock.Listen(netip.MustParseAddrPort("127.0.0.1:0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs, err := c.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range cs {
		if k.Name == name {
			return k.Value
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestRdscatSendNoSocket: send to a port nothing is bound to, over RDS/TCP
// (into the peer namespace) and RDS/IB. The peer's kernel acknowledges the
// messages and drops them (recv_drop_no_sock); send exits 0 but says that
// the host acknowledged them, not that a socket received them, and -v
// shows the drop in this host's counters with a warning. send -reply
// fails with exit 4 and explains that the host acknowledged the message.
// With a listener bound, -v shows them queued and no warning.
func TestRdscatSendNoSocket(t *testing.T) {
	requireVM(t)
	for i, c := range []struct {
		name     string
		from, to netip.Addr
		netns    string
	}{
		{"tcp", vmtest.TCPLocal4, vmtest.TCPPeer4, vmtest.PeerNamespaceName},
		{"ib", vmtest.IBAddr1, vmtest.IBAddr2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := netip.AddrPortFrom(c.to, uint16(4880+2*i)).String()
			before := hostCounter(t, "recv_drop_no_sock")
			send := rdscatCmd(t, "send", "-v", "-from", c.from.String(), dst, "one", "two", "three")
			out, err := send.CombinedOutput()
			if err != nil {
				t.Fatalf("send to an unbound port: %v\n%s", err, out)
			}
			drops := hostCounter(t, "recv_drop_no_sock") - before
			for _, want := range []string{
				fmt.Sprintf("3 messages sent; the host at %v acknowledged all of them (RDS does not tell the sender whether a socket was bound at port %d)", c.to, 4880+2*i),
				"warning: this host's kernel dropped ",
				"nothing is bound at " + dst,
			} {
				if !strings.Contains(string(out), want) {
					t.Errorf("send -v output lacks %q:\n%s", want, out)
				}
			}
			if bytes.Contains(out, []byte("sent and acknowledged")) {
				t.Errorf("send still claims delivery:\n%s", out)
			}
			m := regexp.MustCompile(`recv_drop_no_sock \+(\d+)`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("no counter line:\n%s", out)
			}
			shown, _ := strconv.ParseUint(string(m[1]), 10, 64)
			if drops < 3 || shown < 3 || shown > drops {
				t.Errorf("recv_drop_no_sock rose by %d, send -v showed +%d; want at least 3 and no more than the rise", drops, shown)
			}
			t.Logf("unbound %s: exit 0; kernel recv_drop_no_sock +%d; send -v: %q", dst, drops, lineWith(out, "recv_drop_no_sock"))

			reply := rdscatCmd(t, "send", "-reply", "-timeout", "2s", "-from", c.from.String(), dst, "anyone?")
			rout, err := reply.CombinedOutput()
			if exitCode(err) != 4 {
				t.Fatalf("send -reply to an unbound port: %v, want exit 4\n%s", err, rout)
			}
			for _, want := range []string{"no reply from " + dst + " within 2s", "acknowledged the message, but RDS acknowledges before it looks for a socket", "recv_drop_no_sock"} {
				if !strings.Contains(string(rout), want) {
					t.Errorf("send -reply output lacks %q:\n%s", want, rout)
				}
			}
			t.Logf("send -reply: exit 4: %q", lineWith(rout, "acknowledged"))

			// A listener bound: queued, no warning.
			ready := filepath.Join(t.TempDir(), "ready")
			largs := []string{"listen", "-count", "3", "-timeout", "60s", "-ready", ready, dst}
			if c.netns != "" {
				largs = append([]string{"listen", "-netns", c.netns}, largs[1:]...)
			}
			listen := rdscatCmd(t, largs...)
			var lout bytes.Buffer
			listen.Stdout, listen.Stderr = &lout, &lout
			if err := listen.Start(); err != nil {
				t.Fatal(err)
			}
			defer listen.Process.Kill()
			waitFile(t, ready, 30*time.Second)
			ok := rdscatCmd(t, "send", "-v", "-from", c.from.String(), dst, "one", "two", "three")
			okOut, err := ok.CombinedOutput()
			if err != nil {
				t.Fatalf("send to a listener: %v\n%s", err, okOut)
			}
			if err := listen.Wait(); err != nil || lout.String() != "one\ntwo\nthree\n" {
				t.Fatalf("listener: %v\n%s", err, lout.String())
			}
			if bytes.Contains(okOut, []byte("warning")) || !bytes.Contains(okOut, []byte("its socket queued them")) {
				t.Errorf("send -v to a listener on this host:\n%s", okOut)
			}
			t.Logf("bound %s: %q", dst, lineWith(okOut, "recv_queued"))
		})
	}
}

func lineWith(b []byte, sub string) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestRdscatStressRDMAIdleAndCap runs an RDMA stress receiver with
// -rdma-max-mem 200k and -rdma-idle 3s. A sender of 2 tasks × 8 buffers ×
// 8 KiB (128 KiB) runs; a second sender wanting 128 KiB more is refused
// with the reason (the first one's memory counts against the limit). The
// first sender is killed (SIGKILL, no fin): its buffers are freed after
// the idle timeout, the registered total returns to 0, and the second
// sender then runs. Interrupted, the receiver reports 1 refusal and 2
// idle frees.
func TestRdscatStressRDMAIdleAndCap(t *testing.T) {
	requireVM(t)
	const idle = 3 * time.Second
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	addr := fmt.Sprintf("%v:4890", vmtest.IBAddr2)
	var rout bytes.Buffer
	var rerr lockedBuffer
	recv := rdscatCmd(t, "stress", "-rdma", "write", "-listen", addr, "-rdma-max-mem", "200k", "-rdma-idle", idle.String(), "-json", "-ready", ready)
	recv.Stdout, recv.Stderr = &rout, &rerr
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer recv.Process.Kill()
	waitFile(t, ready, 30*time.Second)

	count := func(re *regexp.Regexp) int { return len(re.FindAllString(rerr.String(), -1)) }
	registered := regexp.MustCompile(`registered 8 buffers of 8192 bytes for task \d of run [0-9a-f]+ from [\d.:]+: 65536 bytes, (\d+) bytes registered in all`)
	waitLog := func(re *regexp.Regexp, n int, d time.Duration) time.Time {
		t.Helper()
		deadline := time.Now().Add(d)
		for count(re) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the receiver did not log %d lines matching %q within %v:\n%s", n, re, d, rerr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Now()
	}

	crash := rdscatCmd(t, "stress", "-rdma", "write", "-rdma-size", "8k", "-to", addr, "-from", vmtest.IBAddr1.String(),
		"-tasks", "2", "-depth", "8", "-duration", "5m", "-timeout", "30s", "-q")
	var cout lockedBuffer
	crash.Stdout, crash.Stderr = &cout, &cout
	if err := crash.Start(); err != nil {
		t.Fatal(err)
	}
	defer crash.Process.Kill()
	waitLog(registered, 2, 60*time.Second)
	ms := registered.FindAllStringSubmatch(rerr.String(), -1)
	before := ms[len(ms)-1][1]
	if before != "131072" {
		t.Fatalf("registered in all after two tasks: %s bytes, want 131072\n%s", before, rerr.String())
	}
	// Besides the senders' buffers, the receiver's rdmaops.Conn keeps the
	// one page its registration probe registered until it closes.
	probePage := int64(os.Getpagesize())
	mappedBefore := dontForkBytes(t, recv.Process.Pid)
	if mappedBefore != 131072+probePage {
		t.Errorf("the receiver maps %d bytes of RDMA memory (MADV_DONTFORK), want 131072 and the probe's page of %d", mappedBefore, probePage)
	}
	time.Sleep(time.Second) // let it run

	// Over the limit while the first sender holds its buffers.
	over := rdscatCmd(t, "stress", "-rdma", "write", "-rdma-size", "8k", "-to", addr, "-from", vmtest.IBAddr1.String(),
		"-tasks", "1", "-depth", "16", "-duration", "2s", "-timeout", "30s")
	oout, err := over.CombinedOutput()
	if exitCode(err) != 1 {
		t.Fatalf("a sender over the receiver's limit: %v, want exit 1\n%s", err, oout)
	}
	refusal := "16 buffers of 8192 bytes (131072 bytes registered) would exceed the receiver's limit of 204800 bytes for all senders (-rdma-max-mem); 131072 bytes are registered for other sender tasks"
	if !strings.Contains(string(oout), "the receiver refused RDMA: "+refusal) {
		t.Errorf("the refused sender does not say why:\n%s", oout)
	}
	if !strings.Contains(rerr.String(), "refused RDMA to task 0 of run ") || !strings.Contains(rerr.String(), refusal) {
		t.Errorf("the receiver did not log the refusal:\n%s", rerr.String())
	}
	t.Logf("over the limit: %s", lineWith(oout, "refused"))

	// The crash: no fin, no goodbye.
	if crash.ProcessState != nil {
		t.Fatalf("the first sender has stopped already:\n%s", cout.String())
	}
	if err := crash.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	crash.Wait()
	freed := regexp.MustCompile(`freed the RDMA buffers of task \d of run [0-9a-f]+ from [\d.:]+: no message of this task for ([\d.]+)s \(the receiver's -rdma-idle is 3s\): its 65536 registered bytes were freed; (\d+) bytes registered in all`)
	at := waitLog(freed, 2, 60*time.Second)
	took := at.Sub(killed)
	fs := freed.FindAllStringSubmatch(rerr.String(), -1)
	after := fs[len(fs)-1][2]
	if after != "0" {
		t.Errorf("registered in all after the idle frees: %s bytes, want 0", after)
	}
	mappedAfter := dontForkBytes(t, recv.Process.Pid)
	if mappedAfter != probePage {
		t.Errorf("after the idle frees the receiver still maps %d bytes of RDMA memory, want only the probe's page of %d", mappedAfter, probePage)
	}
	t.Logf("receiver's RDMA mappings (/proc/PID/smaps, VmFlags dc): %d bytes before the kill, %d bytes after the idle frees", mappedBefore, mappedAfter)
	if took < idle-500*time.Millisecond || took > idle+5*time.Second {
		t.Errorf("the crashed sender's buffers were freed %v after the kill, want about %v", took, idle)
	}
	t.Logf("crashed sender: registered %s bytes before the kill, %s bytes %.2f s after it (-rdma-idle %v); receiver: %q",
		before, after, took.Seconds(), idle, lineWith([]byte(rerr.String()), "freed"))

	// The memory is available again.
	again := rdscatCmd(t, "stress", "-rdma", "write", "-rdma-size", "8k", "-to", addr, "-from", vmtest.IBAddr1.String(),
		"-tasks", "1", "-depth", "16", "-duration", "2s", "-timeout", "30s", "-json")
	var aout, aerr bytes.Buffer
	again.Stdout, again.Stderr = &aout, &aerr
	if err := again.Run(); err != nil {
		t.Fatalf("the sender after the idle frees: %v\n%s%s\nreceiver:\n%s", err, aout.String(), aerr.String(), rerr.String())
	}
	if sr := decodeStress(t, "sender", aout.Bytes()).Sender; sr == nil || sr.Sent == 0 || !sr.CountsMatch {
		t.Fatalf("the sender after the idle frees: %s", aout.String())
	}

	if err := recv.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := recv.Wait(); err != nil {
		t.Fatalf("receiver after SIGINT: %v\n%s%s", err, rout.String(), rerr.String())
	}
	var rep struct {
		Receiver struct {
			RDMA struct {
				Tasks           int    `json:"tasks"`
				Rejected        uint64 `json:"rejected"`
				IdleFreed       uint64 `json:"idle_freed"`
				RegisteredBytes int64  `json:"registered_bytes"`
				PeakBytes       int64  `json:"peak_registered_bytes"`
			} `json:"rdma"`
		} `json:"receiver"`
	}
	if err := json.Unmarshal(rout.Bytes(), &rep); err != nil {
		t.Fatalf("receiver JSON: %v\n%s", err, rout.String())
	}
	r := rep.Receiver.RDMA
	if r.Tasks != 3 || r.Rejected != 1 || r.IdleFreed != 2 || r.RegisteredBytes != 0 || r.PeakBytes != 131072 {
		t.Errorf("receiver RDMA report %+v, want 3 tasks, 1 rejected, 2 freed idle, 0 registered, peak 131072", r)
	}
	t.Logf("receiver report: %+v", r)
}

// TestRdscatStressRDMAIdleStoppedSender: an RDMA stress sender that is
// stopped (SIGSTOP) past the receiver's -rdma-idle has its buffers freed;
// continued, it learns why from the receiver and exits 1 with the reason.
func TestRdscatStressRDMAIdleStoppedSender(t *testing.T) {
	requireVM(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	addr := fmt.Sprintf("%v:4895", vmtest.IBAddr2)
	var rerr lockedBuffer
	recv := rdscatCmd(t, "stress", "-rdma", "write", "-listen", addr, "-rdma-idle", "2s", "-json", "-ready", ready)
	recv.Stderr = &rerr
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer recv.Process.Kill()
	waitFile(t, ready, 30*time.Second)
	waitLog := func(sub string, d time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(d); !strings.Contains(rerr.String(), sub); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the receiver did not log %q within %v:\n%s", sub, d, rerr.String())
			}
		}
	}
	send := rdscatCmd(t, "stress", "-rdma", "write", "-rdma-size", "4k", "-to", addr, "-from", vmtest.IBAddr1.String(),
		"-depth", "4", "-duration", "2m", "-timeout", "20s", "-q")
	var sout lockedBuffer
	send.Stdout, send.Stderr = &sout, &sout
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	defer send.Process.Kill()
	waitLog("registered 4 buffers of 4096 bytes for task 0", 60*time.Second)
	time.Sleep(time.Second)
	if err := send.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitLog("freed the RDMA buffers of task 0", 30*time.Second)
	t.Logf("stopped sender's buffers freed %.2f s after SIGSTOP", time.Since(stopped).Seconds())
	// The receiver logs once it has sent its notice. Continued before
	// the notice reached the stopped sender's socket (6.12 in CI), the
	// sender's writes into the freed keys tore the connection down with
	// the notice still on its way, and the sender saw only failures.
	waitLog("told the sender", 5*time.Second)
	time.Sleep(200 * time.Millisecond)
	if err := send.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- send.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 1 {
			t.Fatalf("the continued sender: %v, want exit 1\n%s", err, sout.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the continued sender did not stop within 90 s:\n%s", sout.String())
	}
	want := "the receiver refused RDMA: no message of this task for "
	if !strings.Contains(sout.String(), want) || !strings.Contains(sout.String(), "(the receiver's -rdma-idle is 2s): its 16384 registered bytes were freed") {
		t.Fatalf("the continued sender does not say why it stopped:\n%s", sout.String())
	}
	t.Logf("continued sender: %s", lineWith([]byte(sout.String()), "refused"))
	recv.Process.Signal(os.Interrupt)
	if err := recv.Wait(); err != nil {
		t.Errorf("receiver after SIGINT: %v\n%s", err, rerr.String())
	}
}

// dontForkBytes sums the mappings of process pid marked MADV_DONTFORK
// ("dc" in smaps' VmFlags): the RDMA regions rdmaops maps, which the Go
// runtime never marks so.
func dontForkBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var total, size int64
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "Size:" && f[2] == "kB":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			size = n << 10
		case len(f) > 0 && f[0] == "VmFlags:":
			for _, fl := range f[1:] {
				if fl == "dc" {
					total += size
				}
			}
		}
	}
	return total
}
