// Package scripttest holds the testscript commands shared by rdscat's host
// script tests and its real-kernel tests.
package scripttest

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// Cmds returns the custom script commands:
//
//	exits CODE PROG [ARGS...]   run PROG and require exit code CODE (stdout
//	                            and stderr are kept for stdout/stderr checks)
//	waitfile [-t DURATION] FILE wait until FILE exists and is not empty
//	sleep DURATION              pause
//	jsonfield FILE PATH WANT    compare a number or string in a JSON file
func Cmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"exits":     exits,
		"waitfile":  waitfile,
		"sleep":     sleep,
		"jsonfield": jsonfield,
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
