// Package vmconf is the contract between the host runner (rdsvm) and the
// guest init it places in the initramfs: the configuration file the guest
// reads at boot and the lines it writes on the status serial port.
package vmconf

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Paths inside the guest.
const (
	ConfigPath = "/rdsvm/config.json" // guest configuration written by the host
	TestDir    = "/rdsvm/pkg"         // working directory of the test; testdata/ is copied here
	TestBinDir = "/rdsvm/bin"         // directory holding the test binary
	ModulesDir = "/lib/modules"       // modules, laid out as on a normal system
)

// Serial ports as numbered by the guest kernel (ttyS<n>). The host attaches
// qemu's serial devices in this order.
const (
	ConsolePort = 0 // kernel console and init's own log
	OutputPort  = 1 // the test's stdout and stderr
	StatusPort  = 2 // status lines, see below
)

// Status lines written by the guest init on the status port, one per line.
const (
	StatusReady = "rdsvm-ready" // "rdsvm-ready <uptime seconds>": setup done, test starting
	StatusExit  = "rdsvm-exit"  // "rdsvm-exit <code>": test binary exited with code
	StatusError = "rdsvm-error" // "rdsvm-error <message>": setup failed, no test run
	CmdlineRole = "rdsvm.role"  // kernel command line key carrying the VM's role
	CmdlineVMs  = "rdsvm.vms"   // kernel command line key carrying the number of VMs
	RoleMain    = "main"        // the first (or only) VM
	RolePeer    = "peer"        // the second VM of a two-VM run
	EnvGuest    = "RDSVM_GUEST" // set to "1" in the test's environment
	EnvRole     = "RDSVM_ROLE"  // "main" or "peer"
	EnvVMs      = "RDSVM_VMS"   // number of VMs in the run, "1" or "2"
	EnvKernel   = "RDSVM_KERNEL_RELEASE"
)

// Config is the guest configuration, stored as JSON at ConfigPath.
type Config struct {
	// Modules are module files relative to /lib/modules/<release>, in load order.
	Modules []string `json:"modules"`
	// Release is the kernel release (uname -r) the modules belong to.
	Release string `json:"release"`
	// Binary is the absolute guest path of the test binary.
	Binary string `json:"binary"`
	// Args are the arguments passed to the test binary (without argv[0]).
	Args []string `json:"args"`
	// Env holds extra KEY=VALUE environment entries for the test.
	Env []string `json:"env"`
	// VMs is 1 for the one-VM topology, 2 for the two-VM one.
	VMs int `json:"vms"`
	// Seed is random bytes from the host that init credits to the
	// guest kernel's entropy pool at boot (see guest.seedRandom).
	Seed []byte `json:"seed"`
}

// Read loads the guest configuration.
func Read() (*Config, error) {
	b, err := os.ReadFile(ConfigPath)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigPath, err)
	}
	return &c, nil
}

// CmdlineValue returns the value of key=value in a kernel command line.
func CmdlineValue(cmdline, key string) (string, bool) {
	for _, f := range strings.Fields(cmdline) {
		if k, v, ok := strings.Cut(f, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
