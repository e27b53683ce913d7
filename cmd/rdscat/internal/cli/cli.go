//go:build linux

// Package cli is the rdscat command: netcat, ping, info and stress for
// Linux Reliable Datagram Sockets (AF_RDS) in one program.
//
// The command's logic lives in this importable package so that tests can run
// it as a real subprocess from any test binary (the test binary re-executes
// itself and calls Main), including inside the kernel VM where no Go
// toolchain is available. Programs other than rdscat and its tests have no
// reason to import it.
//
// # Exit codes
//
//	0  success
//	1  runtime failure (the kernel refused an operation, a peer misbehaved,
//	   counts did not match, ...)
//	2  usage error: unknown command or flag, bad address, bad value
//	3  RDS or the needed transport is not available in this kernel
//	   (load rds_tcp or rds_rdma)
//	4  timeout: no message, no ping reply or no answer in time
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/go-rds/rds/rdssock"
)

// Exit codes returned by Main.
const (
	ExitOK          = 0 // success
	ExitFailure     = 1 // runtime failure
	ExitUsage       = 2 // bad command line
	ExitUnavailable = 3 // no AF_RDS, or the transport is not available
	ExitTimeout     = 4 // no message, reply or answer in time
)

// env is what a subcommand sees of the process: its streams and a context
// that is canceled on SIGINT or SIGTERM.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	usage   string // argument synopsis after "rdscat NAME"
	help    string // long help: description, then examples
	// setup registers the command's flags on fs and returns the function
	// that runs the command with the remaining arguments.
	setup func(fs *flag.FlagSet) func(e *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// Main runs rdscat with args (without the program name) and returns the
// process exit code. Output goes to stdout and stderr; stdin feeds "send".
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		writeTopHelp(stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && name == "help" {
			c, ok := commands[args[1]]
			if !ok {
				fmt.Fprintf(stderr, "rdscat help: unknown command %q; run 'rdscat help' for the list\n", args[1])
				return ExitUsage
			}
			fs, _ := newFlagSet(c, stdout)
			fs.Usage()
			return ExitOK
		}
		writeTopHelp(stdout)
		return ExitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "rdscat", version())
		return ExitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "rdscat: unknown command %q; run 'rdscat help' for the list\n", name)
		return ExitUsage
	}
	fs, run := newFlagSet(c, stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		// The flag package has printed the problem and the usage.
		return ExitUsage
	}
	err := run(e, fs.Args())
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "rdscat %s: %v\n", name, err)
	if code == ExitUsage {
		fmt.Fprintf(stderr, "run 'rdscat %s -h' for help\n", name)
	}
	return code
}

func newFlagSet(c *command, out io.Writer) (*flag.FlagSet, func(*env, []string) error) {
	fs := flag.NewFlagSet("rdscat "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	run := c.setup(fs)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: rdscat %s %s\n\n", c.name, c.usage)
		fmt.Fprintln(w, strings.TrimSpace(c.help))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
		fmt.Fprintln(w, "\n"+exitCodeHelp)
	}
	return fs, run
}

const exitCodeHelp = `Exit codes: 0 success, 1 failure, 2 usage error, 3 RDS or transport not
available (load rds_tcp or rds_rdma), 4 timeout or no reply.`

func writeTopHelp(w io.Writer) {
	fmt.Fprint(w, `rdscat: netcat, ping, info and stress for Linux Reliable Datagram Sockets (AF_RDS)

usage: rdscat COMMAND [flags] [arguments]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	io.WriteString(w, `  help     show help for a command: rdscat help COMMAND (or rdscat COMMAND -h)

Addresses are literal IPs with an RDS port: 10.0.0.1:4000, [fd00::1]:4000,
[fe80::1%eth0]:4000. RDS has no name resolution.

Examples:
  rdscat listen 10.0.0.2:4000                 print every message received
  echo hello | rdscat send 10.0.0.2:4000      send one message per input line
  rdscat ping -c 3 10.0.0.2                   RDS ping, answered by the kernel
  rdscat info connections                     the kernel's RDS connections
  rdscat stress -mode rr -duration 5s -listen 10.0.0.2:4000 -to 10.0.0.2:4000
  rdscat demo                                 see RDS work (boots a VM if needed)

`+exitCodeHelp+"\n")
}

func version() string { return "(devel)" }

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// timeoutError is a wait that ran out: exit code 4.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }

func timeoutf(format string, args ...any) error {
	return &timeoutError{fmt.Sprintf(format, args...)}
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *usageError
	var te *timeoutError
	var es *exitStatus
	switch {
	case errors.As(err, &es):
		return es.code
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &te):
		return ExitTimeout
	case errors.Is(err, rdssock.ErrUnavailable), errors.Is(err, rdssock.ErrTransportUnavailable):
		return ExitUnavailable
	}
	return ExitFailure
}
