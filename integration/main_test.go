//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/go-rds/rds/integration/vmtest"
	"github.com/go-rds/rds/rdssock"
)

// TestMain brings the topology's RDS/TCP connections fully up before the
// tests run (rdssock.WarmUp): Linux up to 6.12 can lose messages sent while
// a new RDS/TCP connection sets up its paths, which would make any test's
// first messages flaky. The reliability suite tests fresh connections on
// purpose, on addresses of its own.
func TestMain(m *testing.M) {
	if vmtest.InGuest() {
		for _, p := range [][2]netip.Addr{{vmtest.TCPLocal4, vmtest.TCPPeer4}, {vmtest.TCPLocal6, vmtest.TCPPeer6}} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := rdssock.WarmUp(ctx, p[0], p[1], nil)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "warming up RDS/TCP %v -> %v: %v\n", p[0], p[1], err)
				os.Exit(1)
			}
		}
	}
	os.Exit(m.Run())
}
