//go:build cbaseline

// Package rdsstresstest is, behind the cbaseline build tag, the real-kernel
// test of the C stress baseline ../rdsstress.c.
//
// The test compiles the C program on the host (gcc -O2 -static -Wall
// -Wextra -Werror; the VM has no compiler), then boots the rdsvm VM with
// this test binary and the program in testdata/, the way
// integration/cmd/rdsbench ships rdsbench.c. It therefore runs on the host,
// not under go test -exec rdsvm (rdstest does not run it):
//
//	go test -tags cbaseline -run TestCStress -v ./integration/internal/bench/cbaseline/rdsstresstest
//	RDSVM_KERNEL=6.12 go test -tags cbaseline -run TestCStress -v ./integration/internal/bench/cbaseline/rdsstresstest
package rdsstresstest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

const binName = "rdsstress-c"

func TestCStress(t *testing.T) {
	if vmtest.InGuest() {
		guest(t)
		return
	}
	host(t)
}

// host compiles the program, checks its usage errors, and runs this test
// again inside the VM with the program in testdata/.
func host(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("compiling rdsstress.c needs gcc and a static libc: apt-get install gcc libc6-dev")
	}
	work := t.TempDir()
	bin := filepath.Join(work, "testdata", binName)
	if err := os.Mkdir(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	// Read here, not only by gcc, so that go test's cache notices an
	// edit; RDSVM_KERNEL, read here too, makes each kernel a cache key.
	src, err := os.ReadFile(filepath.Join("..", "rdsstress.c"))
	if err != nil {
		t.Fatal(err)
	}
	kernel := os.Getenv("RDSVM_KERNEL")
	t.Logf("compiling rdsstress.c for the guest kernel %q (RDSVM_KERNEL; empty: rdsvm's default)", kernel)
	csrc := filepath.Join(work, "rdsstress.c")
	if err := os.WriteFile(csrc, src, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "", "gcc", "-O2", "-static", "-Wall", "-Wextra", "-Werror", "-o", bin, csrc)

	// Usage errors need no kernel: exit status 2 and a message naming
	// the problem.
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage: rdsstress-c passive"},
		{[]string{"sideways"}, "active or passive"},
		{[]string{"active", "bind=10.0.0.1"}, "peer= is required"},
		{[]string{"active", "bind=10.0.0.1", "peer=10.0.0.2:4000", "rdma=write", "depth=2", "notify=4"}, "notify=4: want 1 to depth"},
		{[]string{"active", "bind=10.0.0.1", "peer=10.0.0.2:4000", "size=16"}, "(the header)"},
		{[]string{"active", "bind=10.0.0.1", "peer=10.0.0.2:4000", "verify=1"}, "need rdma=write or rdma=read"},
		{[]string{"passive", "bind=10.0.0.1"}, "a port is required"},
		{[]string{"passive", "bind=10.0.0.1:4000", "colour=blue"}, "unknown argument colour"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, c.args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("rdsstress-c %q: %v, stderr %q; want exit status 2 and %q", c.args, err, stderr.String(), c.want)
		}
	}

	vm := filepath.Join(work, "rdsvm")
	build := exec.Command("go", "build", "-o", vm, "./integration/cmd/rdsvm")
	build.Dir = filepath.Join("..", "..", "..", "..", "..") // the module root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build rdsvm: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The guest runs what -run selected here (TestCStress/rdma, say).
	pattern := "^TestCStress$"
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		pattern = f.Value.String()
	}
	cmd := exec.Command(vm, self, "-test.run", pattern, "-test.v", "-test.timeout", "15m")
	cmd.Dir = work
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the test in the VM failed: %v", err)
	}
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// scenario is one run of a passive and an active rdsstress-c.
type scenario struct {
	name    string
	path    string // "tcp" (two namespaces) or "ib" (one rxe device)
	tasks   int
	active  []string // arguments besides bind, peer, tasks, warm, dur
	rdma    bool
	notify  int
	depth   int
	passive []string
}

func guest(t *testing.T) {
	vmtest.Require(t)
	bin, err := filepath.Abs(filepath.Join("testdata", binName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: run this test on the host (go test -tags cbaseline ./integration/internal/bench/cbaseline/rdsstresstest), which compiles the program", err)
	}
	// RDS/TCP loses messages sent while a new connection sets up its
	// paths (see rdssock.WarmUp); bring it up first, as a user would.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err = rdssock.WarmUp(ctx, vmtest.TCPLocal4, vmtest.TCPPeer4, nil)
	cancel()
	if err != nil {
		t.Fatalf("warming up RDS/TCP: %v", err)
	}
	t.Logf("kernel %s", vmtest.KernelRelease())

	scenarios := []scenario{
		{name: "tcp-rr", path: "tcp", tasks: 2, depth: 4, active: []string{"mode=rr", "depth=4", "size=1024", "ack-size=64"}},
		{name: "tcp-oneway", path: "tcp", tasks: 2, depth: 1, active: []string{"mode=oneway", "size=4096"}, passive: []string{"size=4096"}},
		{name: "ib-rr", path: "ib", tasks: 2, depth: 4, active: []string{"mode=rr", "depth=4", "size=1024"}},
		{name: "rdma-write-4k-notify1", path: "ib", tasks: 2, depth: 8, rdma: true, notify: 1,
			active: []string{"rdma=write", "rdma-size=4k", "depth=8", "notify=1", "verify=1"}},
		{name: "rdma-write-16k-notify4", path: "ib", tasks: 1, depth: 8, rdma: true, notify: 4,
			active: []string{"rdma=write", "rdma-size=16k", "depth=8", "notify=4", "verify=1"}},
		{name: "rdma-read-4k-notify4", path: "ib", tasks: 2, depth: 8, rdma: true, notify: 4,
			active: []string{"rdma=read", "rdma-size=4k", "depth=8", "notify=4", "verify=1"}},
		{name: "rdma-read-16k-notify1", path: "ib", tasks: 1, depth: 8, rdma: true, notify: 1,
			active: []string{"rdma=read", "rdma-size=16k", "depth=8", "notify=1", "verify=1"}},
	}
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, bin, sc, 5000+100*i) })
	}
}

func runScenario(t *testing.T, bin string, sc scenario, port int) {
	pAddr, aAddr := vmtest.IBAddr2, vmtest.IBAddr1
	var pArgs []string
	if sc.path == "tcp" {
		pAddr, aAddr = vmtest.TCPPeer4, vmtest.TCPLocal4
		pArgs = append(pArgs, "netns=/run/netns/"+vmtest.PeerNamespaceName)
	}
	tasks := fmt.Sprint("tasks=", sc.tasks)
	pArgs = append(append([]string{"passive", fmt.Sprintf("bind=%v:%d", pAddr, port), tasks}, pArgs...), sc.passive...)
	aArgs := append([]string{"active", fmt.Sprintf("bind=%v", aAddr), fmt.Sprintf("peer=%v:%d", pAddr, port), tasks,
		"warm=0.25", "dur=1.5"}, sc.active...)

	passive := start(t, bin, pArgs)
	defer passive.kill()
	select {
	case <-passive.ready:
	case <-passive.done:
		t.Fatalf("passive side exited before READY: %v\n%s", passive.err, passive.output())
	case <-time.After(time.Minute):
		t.Fatalf("passive side not READY within a minute\n%s", passive.output())
	}
	active := start(t, bin, aArgs)
	defer active.kill()
	for _, p := range []*proc{active, passive} {
		select {
		case <-p.done:
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s did not finish within 3 minutes\n%s", p.args[0], p.output())
		}
	}
	t.Logf("passive: %s\n%s", strings.Join(pArgs, " "), passive.output())
	t.Logf("active: %s\n%s", strings.Join(aArgs, " "), active.output())
	if active.err != nil || passive.err != nil {
		t.Fatalf("exit status: active %v, passive %v", active.err, passive.err)
	}
	a, p := active.result(t), passive.result(t)

	// Both sides: work was done in the window and nothing went wrong.
	for _, k := range []string{"msgs", "rate", "secs"} {
		if a[k] <= 0 || p[k] <= 0 {
			t.Errorf("%s: active %v, passive %v; want both > 0", k, a[k], p[k])
		}
	}
	if a["cpu_user_s"]+a["cpu_sys_s"] <= 0 || a["cpu_ns_per_msg"] <= 0 || a["machine_cpu_ns_per_msg"] <= 0 {
		t.Errorf("active CPU: user %v s, system %v s, %v ns per message, machine %v ns per message; want > 0",
			a["cpu_user_s"], a["cpu_sys_s"], a["cpu_ns_per_msg"], a["machine_cpu_ns_per_msg"])
	}
	if p["cpu_user_s"]+p["cpu_sys_s"] <= 0 {
		t.Errorf("passive CPU: user %v s, system %v s; want > 0", p["cpu_user_s"], p["cpu_sys_s"])
	}
	zero := map[string]float64{"active seq_errors": a["seq_errors"], "active verify_errors": a["verify_errors"],
		"active failed": a["failed"], "active early_reads": a["early_reads"], "passive seq_errors": p["seq_errors"], "passive verify_errors": p["verify_errors"],
		"passive foreign": p["foreign"]}
	for k, v := range zero {
		if v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	want := map[string][2]float64{
		"counts_match":            {a["counts_match"], 1},
		"peer_counted = sent":     {a["peer_counted"], a["sent"]},
		"passive received = sent": {p["received"], a["sent"]},
		"passive tasks_finished":  {p["tasks_finished"], float64(sc.tasks)},
		"active tasks":            {a["tasks"], float64(sc.tasks)},
		"window msgs <= sent":     {min(a["msgs"], a["sent"]), a["msgs"]},
		"passive window = active": {p["msgs"], a["msgs"]},
	}
	switch {
	case sc.rdma:
		sent := a["sent"]
		notified := sent
		if sc.notify > 1 {
			n := uint64(sent)
			notified = float64(n / uint64(sc.notify))
			if n%uint64(sc.notify) != 0 {
				notified++ // the last operation always asks for a notice
			}
		}
		want["accounted"] = [2]float64{a["accounted"], 1}
		want["completed = sent"] = [2]float64{a["completed"], sent}
		want["notices = notified"] = [2]float64{a["notices"], a["notified"]}
		want["notified (every Nth and the last)"] = [2]float64{a["notified"], notified}
		want["lat_n = notices in the window"] = [2]float64{min(a["lat_n"], a["notices"]), a["lat_n"]}
		want["passive registrations"] = [2]float64{p["registrations"], float64(sc.tasks * sc.depth)}
		if a["lat_n"] <= 0 || a["lat_p50_ns"] <= 0 {
			t.Errorf("RDMA latency: %v samples, p50 %v ns; want > 0", a["lat_n"], a["lat_p50_ns"])
		}
	case strings.Contains(sc.name, "rr"):
		want["completed = sent"] = [2]float64{a["completed"], a["sent"]}
		want["lat_n = msgs"] = [2]float64{a["lat_n"], a["msgs"]}
		want["passive acks = received"] = [2]float64{p["acks"], p["received"]}
		if a["lat_n"] <= 0 || a["lat_p50_ns"] <= 0 || a["lat_p99_ns"] < a["lat_p50_ns"] || a["lat_max_ns"] < a["lat_p99_ns"] {
			t.Errorf("latency: %v samples, p50 %v, p99 %v, max %v ns; want ordered and > 0", a["lat_n"], a["lat_p50_ns"], a["lat_p99_ns"], a["lat_max_ns"])
		}
	default:
		want["passive acks"] = [2]float64{p["acks"], 0}
	}
	for k, v := range want {
		if v[0] != v[1] {
			t.Errorf("%s: got %v, want %v", k, v[0], v[1])
		}
	}
	t.Logf("%s: %.0f msgs/s (passive %.0f/s), p50 %.1f µs, p99 %.1f µs, cpu %.0f ns/msg active, %.0f ns/msg passive, machine %.0f ns/msg",
		sc.name, a["rate"], p["rate"], a["lat_p50_ns"]/1e3, a["lat_p99_ns"]/1e3, a["cpu_ns_per_msg"], p["cpu_ns_per_msg"], a["machine_cpu_ns_per_msg"])
}

// proc is a running rdsstress-c whose output is collected.
type proc struct {
	args  []string
	cmd   *exec.Cmd
	ready chan struct{}
	done  chan struct{}
	err   error
	mu    sync.Mutex
	out   bytes.Buffer
}

func start(t *testing.T, bin string, args []string) *proc {
	t.Helper()
	p := &proc{args: args, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.out.Write(b)
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		readied := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if line == "READY" && !readied {
				readied = true
				close(p.ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// result parses the RESULT line, the format of bench.ParseResult.
func (p *proc) result(t *testing.T) map[string]float64 {
	t.Helper()
	for _, line := range strings.Split(p.output(), "\n") {
		rest, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			continue
		}
		r := map[string]float64{}
		for _, f := range strings.Fields(rest) {
			k, v, ok := strings.Cut(f, "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				t.Fatalf("%s: bad field %q in %q", p.args[0], f, line)
			}
			r[k] = x
		}
		return r
	}
	t.Fatalf("%s printed no RESULT line", p.args[0])
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
