//go:build linux

// Package scripttest supports rdscat's script tests
// (github.com/rogpeppe/go-internal/testscript): the custom script commands
// shared by the host tests in cmd/rdscat and the real-kernel tests in
// cmd/rdscat/integration_linux_test.go, and the real-kernel scripts themselves, which
// are embedded because the kernel tests run inside a VM that has only the
// test binary.
package scripttest

import (
	"embed"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// Cmds returns the custom script commands:
//
//	exits CODE PROG [ARGS...]   run PROG and require exit code CODE (stdout
//	                            and stderr are kept for stdout/stderr checks)
//	waitfile [-t DURATION] FILE wait until FILE exists and is not empty
//	sleep DURATION              pause
//	jsonfield FILE PATH WANT    compare a number or string in a JSON file
//	genfile FILE SIZE           write SIZE bytes cycling through all 256 values
//	jsonsame F1 P1 F2 P2        the value at P1 in F1 equals the one at P2 in F2
func Cmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"exits":     exits,
		"waitfile":  waitfile,
		"sleep":     sleep,
		"jsonfield": jsonfield,
		"genfile":   genfile,
		"jsonsame":  jsonsame,
	}
}

func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! exits")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with code %d, want %d", args[1], got, want)
	}
}

func waitfile(ts *testscript.TestScript, neg bool, args []string) {
	limit := 30 * time.Second
	if len(args) == 3 && args[0] == "-t" {
		d, err := time.ParseDuration(args[1])
		if err != nil {
			ts.Fatalf("waitfile: %v", err)
		}
		limit, args = d, args[2:]
	}
	if len(args) != 1 || neg {
		ts.Fatalf("usage: waitfile [-t DURATION] FILE")
	}
	name := ts.MkAbs(args[0])
	deadline := time.Now().Add(limit)
	for {
		if st, err := os.Stat(name); err == nil && st.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: %s did not appear within %v", args[0], limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sleep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("sleep: %v", err)
	}
	time.Sleep(d)
}

// jsonfield FILE PATH WANT: PATH is dot-separated object keys and array
// indexes; WANT is compared with the value's JSON text (strings unquoted).
// With neg, the values must differ.
func jsonfield(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: jsonfield FILE PATH WANT")
	}
	got, err := Lookup([]byte(ts.ReadFile(args[0])), args[1])
	if err != nil {
		ts.Fatalf("jsonfield %s %s: %v", args[0], args[1], err)
	}
	if (got == args[2]) == neg {
		ts.Fatalf("jsonfield %s %s = %s, want %s%s", args[0], args[1], got, map[bool]string{true: "not ", false: ""}[neg], args[2])
	}
}

func genfile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: genfile FILE SIZE")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		ts.Fatalf("genfile: bad size %q", args[1])
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256) // every byte value, not periodic in 256
	}
	if err := os.WriteFile(ts.MkAbs(args[0]), b, 0o644); err != nil {
		ts.Fatalf("genfile: %v", err)
	}
}

// KernelScripts are the real-kernel scripts (kernel/*.txtar). They expect
// the rdsvm VM topology; see cmd/rdscat/integration_linux_test.go for the variables
// they use.
//
//go:embed kernel/*.txtar
var KernelScripts embed.FS

// WriteKernelScripts copies KernelScripts into dir, for testscript.Params.Dir.
func WriteKernelScripts(dir string) error {
	ents, err := fs.ReadDir(KernelScripts, "kernel")
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := KernelScripts.ReadFile("kernel/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// HasRDS reports whether this kernel has AF_RDS: whether an RDS socket can
// be created.
func HasRDS() bool {
	fd, err := unix.Socket(unix.AF_RDS, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

func jsonsame(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 4 {
		ts.Fatalf("usage: jsonsame FILE1 PATH1 FILE2 PATH2")
	}
	a, err := Lookup([]byte(ts.ReadFile(args[0])), args[1])
	if err != nil {
		ts.Fatalf("jsonsame %s %s: %v", args[0], args[1], err)
	}
	b, err := Lookup([]byte(ts.ReadFile(args[2])), args[3])
	if err != nil {
		ts.Fatalf("jsonsame %s %s: %v", args[2], args[3], err)
	}
	if (a == b) == neg {
		ts.Fatalf("%s %s = %s, %s %s = %s", args[0], args[1], a, args[2], args[3], b)
	}
}
