//go:build linux

package bench

//go:generate go run wakecode_gen.go

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What the VM charges for code: two processes pass a byte back and forth
// over two pipes, each waking for every byte as the ends of a
// request/response exchange do, and after each wake-up both make K calls
// of small functions before they answer: one function K times
// ("repeated") or K different ones ("distinct"), or run the bodies of all
// those functions one after another without the calls ("inlined", K 0 or
// all of them). The measuring process reports its own user and system CPU
// time per message. The C side is cbaseline/wakecode.c; this is the Go
// side, with the same protocol and the same functions (wakecode_funcs.go).
// In the emulated VM, code that runs once per wake-up costs far more than
// code that repeats, in C as in Go; comparing "distinct" with "inlined"
// tells whether that cost is in the instructions or in the calls.

// WakeModes are the kinds of code the measurement runs per message.
var WakeModes = []string{"repeated", "distinct", "inlined"}

// wakeWarm is how many messages pass before the measurement starts.
const wakeWarm = 2000

// wakeCodeWorker is the worker role "wakecode", the Go side of the
// wake-up code measurement: args are the mode, K and N as for wakecode-c,
// and the result line goes to out. It runs its own program again, with
// "echo" before args, as the answering process.
func wakeCodeWorker(args []string, out io.Writer) error {
	if len(args) == 4 && args[0] == "echo" {
		mode, k, _, err := wakeArgs(args[1:])
		if err != nil {
			return err
		}
		return wakeEcho(mode, k)
	}
	mode, k, n, err := wakeArgs(args)
	if err != nil {
		return err
	}
	var there, back [2]int
	if err := unix.Pipe2(there[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	if err := unix.Pipe2(back[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	// This process's own arguments, those before args, start the echo.
	pre := os.Args[:len(os.Args)-len(args)]
	echo := exec.Command(pre[0], append(append(append([]string(nil), pre[1:]...), "echo"), args...)...)
	// The child reads fd 3 and writes fd 4.
	echo.ExtraFiles = []*os.File{os.NewFile(uintptr(there[0]), "there"), os.NewFile(uintptr(back[1]), "back")}
	var stderr bytes.Buffer
	echo.Stderr = &stderr
	if err := echo.Start(); err != nil {
		return err
	}
	unix.Close(there[0])
	unix.Close(back[1])
	var r0, r1 unix.Rusage
	var t0 time.Time
	var xerr error
	for i := 0; i < wakeWarm+n && xerr == nil; i++ {
		if i == wakeWarm {
			unix.Getrusage(unix.RUSAGE_SELF, &r0)
			t0 = time.Now()
		}
		if xerr = wakeXfer(there[1], true); xerr == nil {
			wakeWork(mode, k)
			xerr = wakeXfer(back[0], false)
		}
	}
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	wall := time.Since(t0)
	unix.Close(there[1])
	werr := echo.Wait()
	unix.Close(back[0])
	if xerr != nil || werr != nil {
		return fmt.Errorf("wakecode: %v (the answering process: %v %s)", xerr, werr, bytes.TrimSpace(stderr.Bytes()))
	}
	us := func(a, b unix.Timeval) float64 { return float64(b.Nano()-a.Nano()) / 1e3 / float64(n) }
	_, err = fmt.Fprintf(out, "RESULT user_us=%.3f sys_us=%.3f wall_us=%.3f msgs=%d\n",
		us(r0.Utime, r1.Utime), us(r0.Stime, r1.Stime), float64(wall.Microseconds())/float64(n), n)
	return err
}

func wakeArgs(args []string) (mode string, k, n int, err error) {
	if len(args) != 3 {
		return "", 0, 0, errors.New("wakecode: want MODE K N")
	}
	mode = args[0]
	k, err1 := strconv.Atoi(args[1])
	n, err2 := strconv.Atoi(args[2])
	switch {
	case mode != "repeated" && mode != "distinct" && mode != "inlined":
		err = fmt.Errorf("wakecode: mode %q: want repeated, distinct or inlined", mode)
	case err1 != nil || err2 != nil || k < 0 || n <= 0 || mode == "distinct" && k > len(wakeFuncs) || mode == "inlined" && k != 0 && k != len(wakeFuncs):
		err = fmt.Errorf("wakecode: K must be 0 to %d (distinct), 0 or %[1]d (inlined), and N positive: %q", len(wakeFuncs), args[1:])
	}
	return mode, k, n, err
}

// wakeEcho answers every byte on fd 3 with one on fd 4 after the same
// calls, until fd 3 ends.
func wakeEcho(mode string, k int) error {
	for {
		if err := wakeXfer(3, false); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		wakeWork(mode, k)
		if err := wakeXfer(4, true); err != nil {
			return err
		}
	}
}

var wakeSink int64

func wakeWork(mode string, k int) {
	x := int64(1)
	switch mode {
	case "inlined":
		if k > 0 {
			x = wakeInline(x)
		}
	case "distinct":
		for _, f := range wakeFuncs[:k] {
			x = f(x)
		}
	default:
		f := wakeFuncs[0]
		for range k {
			x = f(x)
		}
	}
	wakeSink += x
}

// wakeXfer writes or reads one byte, blocking in the kernel as the C side
// does, with a raw system call: like rdssock's reads, it keeps the P, so
// that the runtime's path for a system call that blocks (its P handed off
// and taken back) does not add its own cost to every message.
func wakeXfer(fd int, write bool) error {
	var b [1]byte
	call := uintptr(unix.SYS_READ)
	if write {
		call = unix.SYS_WRITE
	}
	for {
		n, _, e := unix.RawSyscall(call, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1)
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return e
		case n == 0:
			return io.EOF
		}
		return nil
	}
}

// wakeCode runs the wake-up code measurement: each round, for C and Go
// alternately, K=0 and then WakeK calls of each mode, cfg.WakeRounds
// rounds.
func (d *driver) wakeCode(rep *Report) {
	d.logf("wake-up code: %d rounds, %d calls per message", d.cfg.WakeRounds, WakeK)
	type run struct {
		mode string
		k    int
	}
	runs := []run{{"repeated", 0}}
	for _, m := range WakeModes {
		runs = append(runs, run{m, WakeK})
	}
	rows := make([]WakeCost, 0, 2*len(runs))
	for _, lang := range []string{"C", "Go"} {
		for _, r := range runs {
			rows = append(rows, WakeCost{Lang: lang, Mode: r.mode, K: r.k})
		}
	}
	for round := range d.cfg.WakeRounds {
		for j := range 2 {
			lang := j
			if round%2 == 1 {
				lang = 1 - j // alternate which language goes first
			}
			for i, r := range runs {
				row := &rows[lang*len(runs)+i]
				v, err := d.wakeRun(row.Lang, r.mode, r.k)
				if err != nil {
					rep.Failures = append(rep.Failures, fmt.Sprintf("wake-up code %s %s k=%d round %d: %v", row.Lang, r.mode, r.k, round+1, err))
					continue
				}
				row.UserUS = append(row.UserUS, v)
				d.logf("wake-up code %s %s k=%d round %d: %.2f us user CPU per message", row.Lang, r.mode, r.k, round+1, v)
			}
		}
	}
	rep.WakeCode = rows
}

// wakeRun runs one measurement and returns the user CPU time per message.
func (d *driver) wakeRun(lang, mode string, k int) (float64, error) {
	args := []string{mode, strconv.Itoa(k), strconv.Itoa(WakeMsgs)}
	bin := d.cfg.WakeC
	if lang == "Go" {
		bin, args = d.cfg.GoBinary, append(append(append([]string(nil), d.cfg.GoArgs...), "wakecode"), args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %v: %s", bin, err, bytes.TrimSpace(stderr.Bytes()))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if r, ok := ParseResult(line); ok {
			if v, ok := r["user_us"]; ok {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("%s printed no RESULT line: %q", bin, out)
}
