//go:build linux

// Command rdsinstr counts the user-space instructions that rdssock spends
// on a read that has to wait, and on a send, against the C a user would
// write, on the host and without RDS: callgrind counts instructions, not
// seconds, so the numbers repeat within a few percent whatever else the
// machine does, where rdsbench's rates under TCG move by 10-50%.
//
// From the repository root (needs valgrind and gcc):
//
//	go run ./integration/cmd/rdsinstr
//
// A paced sender (integration/internal/bench/cbaseline/recvwait.c) sends
// 64-byte messages on one end of an AF_UNIX SOCK_SEQPACKET pair, one every
// -usec, slowly enough that the receiver waits for each. The receiver,
// under callgrind, is either the C loop of the stress baseline (ppoll,
// then recvmsg until EAGAIN) or rdssock's TestInstrReadWait reading with
// ReadMsg, ReadMsgContext or ReadBatch (-modes), or TestInstrRDMARead
// reading with rdmaops' Conn.ReadMsg, as the passive side of an RDMA
// program reads immediate data, or making the C loop's system calls
// raw from Go: the floor, what Go itself costs without rdssock. Each
// receiver runs twice, for -n1 and for -n2 messages; the difference
// divided by n2-n1 is the count per message, free of start-up costs.
// -reps runs of each give the median.
//
// The Go receiver runs with GODEBUG=asyncpreemptoff=1 (callgrind cannot
// follow Go's preemption signals). A reader that sleeps in ppoll wait after
// wait parks in the runtime poller about every 8 ms (see rdssock's
// kwait_linux.go), so the share of that cost in a message depends on the
// pace: the default of 150µs is about the pace of rdsbench's RDMA rows at
// depth 1, where the reader waits for every message and parks about every
// 50th. -park=false leaves the parks out (sysmon then preempts the reader
// every 10 ms instead). -top N prints the N functions that cost most per
// message.
//
// Each table also gives the calls per message, from callgrind's call
// counts: all of the receiving process's; those within the counted send
// or operation (see callgrindCalls). In the emulated VM of
// rdsbench, a call of code that has not run since the last wake-up costs
// about as much as a hundred or more instructions written inline (see
// BENCHMARKS.md, "What the VM charges for code"), so the calls weigh more
// there than the instructions.
//
// A second table (-sends) counts a send that needs no wait: the same
// pair, the C receiver draining one end, and on the other C's sendmsg
// loop or TestInstrWrite sending with WriteMsg or WriteMsgContext, at the
// same pace. Only the instructions within the send call are counted
// (callgrind --toggle-collect on sendmsg, or on rdssock's writeMsg, which
// both Go calls run), so the pacing between sends is not.
//
// A third table (-rdma) counts an RDMA WRITE with immediate data issued
// the documented way, on the same pair, the C receiver draining it (the
// socket carries the message and ignores the RDS control data): the C
// stress baseline's issue (recvwait.c's issue_rdma: RDS_CMSG_RDMA_ARGS
// built, sendmsg), rdmaops' Do, and Do with the rest of the operation's
// user-space life, its completion notice handed to HandleControl as a
// read would and a Wait that finds it complete (rdssock's TestInstrRDMA,
// counting only within its oneRDMA). The read that brings the notice is
// the first table's. The Go side runs with GOMAXPROCS=1, so that no other
// thread of the runtime runs while the count is on.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/go-rds/rds/integration/internal/repo"
	"golang.org/x/sys/unix"
)

var (
	flagN1    = flag.Int("n1", 500, "messages in the shorter run")
	flagN2    = flag.Int("n2", 4000, "messages in the longer run")
	flagUsec  = flag.Int("usec", 150, "microseconds between two messages of the sender")
	flagPark  = flag.Bool("park", true, "let the Go reader park in the runtime poller about every 8 ms, as it does in use (false: never; then sysmon preempts it every 10 ms instead)")
	flagModes = flag.String("modes", "floor,nil,background,cancel,timeout,batch,rdmaops", "Go reads to count: ReadMsg (nil), ReadMsgContext with a background, cancelable or timeout context, ReadBatch (batch), rdmaops' Conn.ReadMsg with a timeout context (rdmaops), or the floor (raw system calls, no rdssock)")
	flagReps  = flag.Int("reps", 3, "runs of each count; the median is shown")
	flagTop   = flag.Int("top", 0, "also show the N functions costing most per message in each receiver and sender")
	flagKeep  = flag.String("keep", "", "directory for the callgrind files (default: a temporary one, removed)")
	flagSends = flag.Bool("sends", true, "also count the instructions inside one send that needs no wait: C's sendmsg, WriteMsg and WriteMsgContext")
	flagRDMA  = flag.Bool("rdma", true, "also count an RDMA operation: C building RDS_CMSG_RDMA_ARGS and sending it, rdmaops' Do, and Do with its notice's handling")
)

// receiver is one way of receiving, or of sending, that is counted.
type receiver struct {
	name string
	cmd  func(n int) *exec.Cmd
	// For a sender: the function whose instructions alone are counted
	// (callgrind --toggle-collect, of which valgrind 3.19 honours only the
	// first given), so that the pacing between sends is not; the other
	// end of the pair is drained by the C receiver.
	send string
}

func main() {
	flag.Parse()
	if *flagN2 <= *flagN1 || *flagN1 <= 0 || *flagReps <= 0 {
		fatalf("-n1 and -n2 must satisfy 0 < n1 < n2, and -reps must be positive")
	}
	for _, tool := range []string{"valgrind", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			fatalf("%s not found: install it (apt-get install valgrind gcc)", tool)
		}
	}
	root, err := repo.Root("rdsinstr")
	if err != nil {
		fatalf("%v", err)
	}
	dir := *flagKeep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rdsinstr-"); err != nil {
			fatalf("%v", err)
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	helper := filepath.Join(dir, "recvwait")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", helper,
		filepath.Join(root, "integration/internal/bench/cbaseline/recvwait.c")).CombinedOutput(); err != nil {
		fatalf("gcc: %v\n%s", err, out)
	}
	testBin := filepath.Join(dir, "rdssock.test")
	build := exec.Command("go", "test", "-c", "-o", testBin, "./rdssock")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fatalf("go test -c ./rdssock: %v\n%s", err, out)
	}

	receivers := []receiver{{
		name: "C: ppoll, recvmsg until EAGAIN",
		cmd: func(n int) *exec.Cmd {
			return exec.Command(helper, "recv", "3", strconv.Itoa(n))
		},
	}}
	for _, m := range strings.Split(*flagModes, ",") {
		m = strings.TrimSpace(m)
		name, ok := modeNames[m]
		if !ok {
			fatalf("-modes: unknown mode %q (want floor, nil, background, cancel, timeout, batch, rdmaops)", m)
		}
		test := "^TestInstrReadWait$"
		if m == "rdmaops" {
			test = "^TestInstrRDMARead$"
		}
		receivers = append(receivers, receiver{name: name, cmd: func(n int) *exec.Cmd {
			c := exec.Command(testBin, "-test.run", test, "-test.count=1")
			c.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "RDSINSTR_NOPARK="+noPark(),
				"RDSINSTR_MODE="+m, "RDSINSTR_N="+strconv.Itoa(n))
			return c
		}})
	}

	table(dir, helper, fmt.Sprintf("user-space instructions per received 64-byte message that had to wait (callgrind; %d and %d messages, one every %dµs; median of %d)",
		*flagN1, *flagN2, *flagUsec, *flagReps), "receiver", "r", receivers)
	if *flagSends {
		fmt.Println()
		table(dir, helper, fmt.Sprintf(sendTable, *flagN1, *flagN2, *flagUsec, *flagReps), "sender", "s", senders(helper, testBin))
	}
	if *flagRDMA {
		fmt.Println()
		table(dir, helper, fmt.Sprintf(rdmaTable, *flagN1, *flagN2, *flagUsec, *flagReps), "issuer", "d", issuers(helper, testBin))
	}
}

// issuers are the RDMA operations counted: the C stress baseline's
// (cbaseline/recvwait.c's issue_rdma, as rdsstress.c issues one), and
// rdmaops' Do, alone and with the handling of the operation's notice
// (rdssock's TestInstrRDMA).
func issuers(helper, testBin string) []receiver {
	goSide := func(n int) *exec.Cmd {
		c := exec.Command(testBin, "-test.run", "^TestInstrRDMA$", "-test.count=1")
		c.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=1", "RDSINSTR_N="+strconv.Itoa(n), "RDSINSTR_USEC="+strconv.Itoa(*flagUsec))
		return c
	}
	return []receiver{{
		name: "C: RDS_CMSG_RDMA_ARGS built, sendmsg",
		cmd: func(n int) *exec.Cmd {
			return exec.Command(helper, "rdma", "3", strconv.Itoa(n), strconv.Itoa(*flagUsec))
		},
		send: "issue_rdma",
	}, {
		name: "Go: rdmaops Conn.Do",
		cmd:  goSide,
		send: "*rdmaops.(?Conn).Do",
	}, {
		name: "Go: Do, its notice through HandleControl, Wait",
		cmd:  goSide,
		send: "*rdssock_test.oneRDMA",
	}}
}

const rdmaTable = "user-space instructions per RDMA WRITE of 4 KiB with 16 bytes of immediate data (callgrind, counting only within C's issue_rdma, or rdmaops' Do, HandleControl's walk of the notice and a Wait that finds the operation complete, without the read that brings the notice; %d and %d operations, one every %dµs; median of %d)"

// senders are the sends counted: the C stress baseline's sendmsg and
// rdssock's WriteMsg, with and without a context.
func senders(helper, testBin string) []receiver {
	rs := []receiver{{
		name: "C: sendmsg",
		cmd: func(n int) *exec.Cmd {
			return exec.Command(helper, "send", "3", strconv.Itoa(n), strconv.Itoa(*flagUsec))
		},
		send: "sendmsg",
	}}
	for _, m := range []string{"write", "writecancel"} {
		rs = append(rs, receiver{name: sendModeNames[m], cmd: func(n int) *exec.Cmd {
			c := exec.Command(testBin, "-test.run", "^TestInstrWrite$", "-test.count=1")
			c.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "RDSINSTR_MODE="+m,
				"RDSINSTR_N="+strconv.Itoa(n), "RDSINSTR_USEC="+strconv.Itoa(*flagUsec))
			return c
		}, send: "*rdssock.(?Conn).writeMsg"})
	}
	return rs
}

var sendModeNames = map[string]string{
	"write":       "Go: WriteMsg",
	"writecancel": "Go: WriteMsgContext, cancelable context",
}

const sendTable = "user-space instructions inside one send of a 64-byte message that needs no wait (callgrind, counting only within C's sendmsg or rdssock's writeMsg; %d and %d messages, one every %dµs; median of %d)"

// table counts each of rs and prints the counts as a table headed by
// title, its rows named in a column headed column, the callgrind files
// named after prefix; with -top, then the functions that cost most per
// message in each.
func table(dir, helper, title, column, prefix string, rs []receiver) {
	fmt.Printf("%s\n\n| %s | instructions per message | ratio to C | spread | calls per message |\n|---|--:|--:|--:|--:|\n", title, column)
	var base float64
	var tops []string
	for i, r := range rs {
		var per, callsPer []float64
		var files [2]string
		for rep := range *flagReps {
			var totals, calls [2]int64
			for j, n := range []int{*flagN1, *flagN2} {
				out := filepath.Join(dir, fmt.Sprintf("%s%d-n%d-rep%d.callgrind", prefix, i, n, rep))
				var err error
				for try := 1; ; try++ {
					totals[j], calls[j], err = count(r, n, helper, out)
					if err == nil || try == 3 || !errors.Is(err, errUnrecognised) {
						break
					}
				}
				if err != nil {
					fatalf("%s, %d messages: %v", r.name, n, err)
				}
				files[j] = out
			}
			per = append(per, float64(totals[1]-totals[0])/float64(*flagN2-*flagN1))
			callsPer = append(callsPer, float64(calls[1]-calls[0])/float64(*flagN2-*flagN1))
		}
		med, spread := medianSpread(per)
		medCalls, _ := medianSpread(callsPer)
		if i == 0 {
			base = med
		}
		fmt.Printf("| %s | %.0f | %.2f | %.0f%% | %.1f |\n", r.name, med, med/base, spread*100, medCalls)
		if *flagTop > 0 {
			lines, err := topFunctions(files[0], files[1], *flagN2-*flagN1, *flagTop)
			if err != nil {
				fatalf("callgrind_annotate: %v", err)
			}
			tops = append(tops, "\n"+r.name+" (last run), per message:\n"+strings.Join(lines, "\n"))
		}
	}
	for _, t := range tops {
		fmt.Println(t)
	}
}

var modeNames = map[string]string{
	"nil":        "Go: ReadMsg",
	"background": "Go: ReadMsgContext, context.Background",
	"cancel":     "Go: ReadMsgContext, cancelable context",
	"timeout":    "Go: ReadMsgContext, context with a deadline",
	"batch":      "Go: ReadBatch of up to 16, cancelable context",
	"floor":      "Go floor: the C loop as raw system calls, no rdssock",
	"rdmaops":    "Go: rdmaops Conn.ReadMsg, context with a deadline",
}

// count runs receiver r under callgrind for n messages from a paced
// sender (or sender r, with the C receiver at the other end) and returns
// the instructions and the calls it counted, writing its callgrind file
// to out.
func count(r receiver, n int, helper, out string) (instrs, calls int64, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	senderEnd, recvEnd := os.NewFile(uintptr(fds[0]), "sender"), os.NewFile(uintptr(fds[1]), "receiver")
	peerEnd, measuredEnd := senderEnd, recvEnd
	peer := exec.Command(helper, "send", "3", strconv.Itoa(n), strconv.Itoa(*flagUsec))
	args := []string{"--tool=callgrind", "--callgrind-out-file=" + out}
	if r.send != "" {
		peerEnd, measuredEnd = recvEnd, senderEnd
		peer = exec.Command(helper, "recv", "3", strconv.Itoa(n))
		args = append(args, "--toggle-collect="+r.send)
	}
	peer.ExtraFiles = []*os.File{peerEnd}
	peer.Stderr = os.Stderr
	rc := r.cmd(n)
	vg := exec.Command("valgrind", append(append(args, rc.Path), rc.Args[1:]...)...)
	vg.Env = rc.Env
	vg.ExtraFiles = []*os.File{measuredEnd}
	var vgOut bytes.Buffer
	vg.Stdout, vg.Stderr = &vgOut, &vgOut
	// Messages that arrive while valgrind is still starting the receiver
	// are read without a wait; the pace makes those few, and both runs
	// have them, so the difference is all waiting reads.
	if err := vg.Start(); err != nil {
		return 0, 0, err
	}
	if err := peer.Start(); err != nil {
		vg.Process.Kill()
		vg.Wait()
		return 0, 0, err
	}
	senderEnd.Close()
	recvEnd.Close()
	perr := peer.Wait()
	verr := vg.Wait()
	if verr != nil {
		if bytes.Contains(vgOut.Bytes(), []byte("valgrind: Unrecognised instruction")) {
			return 0, 0, fmt.Errorf("%w: %v", errUnrecognised, verr)
		}
		return 0, 0, fmt.Errorf("%v\n%s", verr, vgOut.Bytes())
	}
	if perr != nil {
		return 0, 0, fmt.Errorf("the other end (%s): %v", peer.Args[1], perr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return 0, 0, err
	}
	if instrs, err = callgrindTotal(data); err != nil {
		return 0, 0, err
	}
	return instrs, callgrindCalls(data, r.send), nil
}

// errUnrecognised is a run that valgrind stopped at an instruction it
// cannot decode: valgrind 3.19 lacks RDTSCP, which the Go runtime runs
// when one of its locks is contended (runtime.lock2's cputicks), so a
// run now and then dies of SIGILL through no fault of the code counted.
// Such a run is made again, up to three times.
var errUnrecognised = errors.New("valgrind met an instruction it cannot decode")

var totalLine = regexp.MustCompile(`(?m)^(?:totals|summary):\s+(\d+)`)

// callgrindCalls returns how many calls a callgrind output file records,
// in every thread. callgrind records every call, whether or not
// --toggle-collect has the count on, so with root (the pattern of a count
// within one function: the sends and RDMA operations) only the calls of
// root and those made within it count. The walk within it stops at the Go
// runtime, whose scheduler the pacing between two counted calls also
// runs: a call into the runtime counts, the runtime's own calls do not.
func callgrindCalls(data []byte, root string) int64 {
	type arc struct{ from, to string }
	arcs := map[arc]int64{}
	names := map[string]string{} // callgrind's compressed names: "(7)" to the name
	name := func(v []byte) string {
		id, rest, _ := bytes.Cut(bytes.TrimSpace(v), []byte(" "))
		if len(rest) > 0 {
			names[string(id)] = string(rest)
		}
		return names[string(id)]
	}
	var fn, cfn string
	for line := range bytes.Lines(data) {
		switch {
		case bytes.HasPrefix(line, []byte("fn=")):
			fn = name(line[3:])
		case bytes.HasPrefix(line, []byte("cfn=")):
			cfn = name(line[4:])
		case bytes.HasPrefix(line, []byte("calls=")):
			if f := bytes.Fields(line[6:]); len(f) > 0 {
				if n, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					arcs[arc{fn, cfn}] += n
				}
			}
		}
	}
	counted := func(arc) bool { return true }
	if root != "" {
		re := regexp.MustCompile("^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(root)) + "$")
		inside := map[string]bool{}
		var todo []string
		add := func(f string) {
			if !inside[f] && !strings.HasPrefix(f, "runtime.") {
				inside[f] = true
				todo = append(todo, f)
			}
		}
		for a := range arcs {
			if re.MatchString(a.to) {
				add(a.to)
			}
		}
		for len(todo) > 0 {
			f := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for a := range arcs {
				if a.from == f {
					add(a.to)
				}
			}
		}
		counted = func(a arc) bool { return inside[a.from] || re.MatchString(a.to) }
	}
	var total int64
	for a, n := range arcs {
		if counted(a) {
			total += n
		}
	}
	return total
}

// callgrindTotal returns the instruction total of a callgrind output file.
func callgrindTotal(data []byte) (int64, error) {
	m := totalLine.FindSubmatch(data)
	if m == nil {
		return 0, errors.New("no totals line in the callgrind file")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// medianSpread returns the median of v and its spread, (max-min)/median.
func medianSpread(v []float64) (median, spread float64) {
	s := slices.Clone(v)
	sort.Float64s(s)
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if median != 0 {
		spread = (s[len(s)-1] - s[0]) / median
	}
	return median, spread
}

// topFunctions returns the k functions whose own instructions grew most
// from the shorter run (a) to the longer (b), per message.
func topFunctions(a, b string, messages, k int) ([]string, error) {
	ca, err := selfCosts(a)
	if err != nil {
		return nil, err
	}
	cb, err := selfCosts(b)
	if err != nil {
		return nil, err
	}
	return perMessage(ca, cb, messages, k), nil
}

func selfCosts(file string) (map[string]int64, error) {
	out, err := exec.Command("callgrind_annotate", "--inclusive=no", "--tree=none", "--auto=no", "--threshold=100", file).Output()
	if err != nil {
		return nil, err
	}
	return parseAnnotate(out), nil
}

// annotateLine is one function of callgrind_annotate's listing:
// "12,345 ( 1.23%)  file:function [object]".
var annotateLine = regexp.MustCompile(`^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.+?)\s*$`)

// parseAnnotate returns each function's own instructions from
// callgrind_annotate's output, by function name (the file and object
// dropped, the costs of one function listed under several files summed).
func parseAnnotate(out []byte) map[string]int64 {
	costs := map[string]int64{}
	for _, l := range strings.Split(string(out), "\n") {
		m := annotateLine.FindStringSubmatch(l)
		if m == nil || strings.Contains(m[2], "PROGRAM TOTALS") {
			continue
		}
		fn := m[2]
		if i := strings.LastIndex(fn, " ["); i > 0 && strings.HasSuffix(fn, "]") {
			fn = fn[:i]
		}
		if _, f, ok := strings.Cut(fn, ":"); ok {
			fn = f // the source file
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		if err == nil {
			costs[fn] += n
		}
	}
	return costs
}

// perMessage lists the k functions whose cost grew most from a to b,
// divided by the messages b had more, largest first, as "  123.4 name".
func perMessage(a, b map[string]int64, messages, k int) []string {
	type fc struct {
		fn   string
		cost float64
	}
	var all []fc
	for fn, n := range b {
		all = append(all, fc{fn, float64(n-a[fn]) / float64(messages)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].cost != all[j].cost {
			return all[i].cost > all[j].cost
		}
		return all[i].fn < all[j].fn
	})
	var lines []string
	for _, f := range all[:min(k, len(all))] {
		lines = append(lines, fmt.Sprintf("  %7.1f %s", f.cost, f.fn))
	}
	return lines
}

// noPark is RDSINSTR_NOPARK's value for the Go reader: "" lets it park.
func noPark() string {
	if *flagPark {
		return ""
	}
	return "1"
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rdsinstr: "+format+"\n", args...)
	os.Exit(1)
}
