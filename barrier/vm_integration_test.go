//go:build integration

package barrier_test

import (
	"testing"

	"github.com/go-rds/rds/integration/vmtest"
)

// TestIntegrationInVM makes this package's test binary run in the rdsvm
// VM on every kernel (rdstest runs the packages that have integration
// tests there), so that its examples with // Output run on each kernel
// too; outside the VM it fails.
func TestIntegrationInVM(t *testing.T) {
	vmtest.Require(t)
	if r := vmtest.KernelRelease(); r == "" {
		t.Fatal("no kernel release: not on Linux")
	} else {
		t.Logf("examples and tests of this package run on %s", r)
	}
}
