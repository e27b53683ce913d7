//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
			Count uint64  `json:"count"`
			P50   float64 `json:"p50"`
			P99   float64 `json:"p99"`
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
		Transport     string `json:"transport"`
		Received      uint64 `json:"received"`
		ReceivedBytes uint64 `json:"received_bytes"`
		TasksFinished int    `json:"tasks_finished"`
		SeqErrors     uint64 `json:"seq_errors"`
		Foreign       uint64 `json:"foreign"`
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
// receiver for WRITE, by the sender for READ).
func TestRdscatStressRDMA(t *testing.T) {
	vmtest.Require(t)
	const tasks, depth = 2, 4
	for i, op := range []string{"write", "read"} {
		t.Run(op, func(t *testing.T) {
			port := 4820 + i
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready")
			var rout, rerr bytes.Buffer
			recv := rdscatCmd(t, "stress", "-rdma", op, "-listen", fmt.Sprintf("%v:%d", vmtest.IBAddr2, port), "-once", "-json", "-timeout", "60s", "-ready", ready)
			recv.Stdout, recv.Stderr = &rout, &rerr
			if err := recv.Start(); err != nil {
				t.Fatal(err)
			}
			defer recv.Process.Kill()
			waitReady(t, ready, recv, &rerr)

			send := rdscatCmd(t, "stress", "-rdma", op, "-rdma-size", "8k", "-verify",
				"-to", fmt.Sprintf("%v:%d", vmtest.IBAddr2, port), "-from", vmtest.IBAddr1.String(),
				"-tasks", fmt.Sprint(tasks), "-depth", fmt.Sprint(depth), "-duration", "3s", "-timeout", "30s", "-json")
			var sout, serr bytes.Buffer
			send.Stdout, send.Stderr = &sout, &serr
			sendErr := send.Run()
			recvErr := recv.Wait()
			if sendErr != nil || recvErr != nil {
				t.Fatalf("sender: %v\n%s%s\nreceiver: %v\n%s%s", sendErr, sout.String(), serr.String(), recvErr, rout.String(), rerr.String())
			}
			sr := decodeStress(t, "sender", sout.Bytes()).Sender
			rr := decodeStress(t, "receiver", rout.Bytes()).Receiver
			if sr == nil || sr.RDMA == nil || rr == nil || rr.RDMA == nil {
				t.Fatalf("summaries without their RDMA parts:\n%s\n%s", sout.String(), rout.String())
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

// TestRdscatStressRDMANotIB: RDMA mode on an RDS/TCP address fails with
// exit code 3 and says that RDMA needs an IB address, on the receiver
// (checked at bind) and on a sender alone (checked after its warm-up).
func TestRdscatStressRDMANotIB(t *testing.T) {
	vmtest.Require(t)
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
