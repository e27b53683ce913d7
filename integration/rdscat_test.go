//go:build integration

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/go-rds/rds/cmd/rdscat/cli"
	"github.com/go-rds/rds/cmd/rdscat/scripttest"
	"github.com/go-rds/rds/integration/vmtest"
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
// (cmd/rdscat/scripttest/kernel/*.txtar): listen/send round trips with exact
// bytes across namespaces, over IPv6, loopback and Soft-RoCE; ping with
// replies; info tables holding the live connection; stress in both modes
// with the receiver's counts checked; errors with their exit codes.
func TestIntegrationRdscatScripts(t *testing.T) {
	vmtest.Require(t)
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
