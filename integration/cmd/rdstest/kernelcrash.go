package main

import "strings"

// guestPanicked starts rdsvm's description of a guest kernel panic (see
// panicLine in integration/cmd/rdsvm).
const guestPanicked = "the guest kernel panicked: "

// knownCrash is a guest kernel crash that is the kernel's, shown without
// this library: a package run that ends in it is run once more.
type knownCrash struct {
	signature string // in rdsvm's description of the panic
	evidence  string // why it is the kernel's
}

// knownCrashes lists the guest kernel crashes rdstest answers with one
// rerun of the package. The first run's results stay in the results file;
// the summary counts the rerun and names the crash. A crash not listed
// here fails the run.
var knownCrashes = []knownCrash{
	{
		signature: "Oops: divide error in rds_queue_reconnect",
		evidence: "Linux 7.2 reads cp_reconnect_jiffies twice, checking it is not 0 and then dividing by it, " +
			"while rds_connect_path_complete may zero it on another work queue (net/rds/threads.c); " +
			"one CI run crashed in TestUseOnceKey, when it ran the plain C reference useonce-c first (TESTING.md, Kernel defects measured)",
	},
}

// knownCrashIn returns the known crash among rdsvm's panic descriptions,
// if every panic is one.
func knownCrashIn(crashes []string) (knownCrash, bool) {
	var found knownCrash
	for _, c := range crashes {
		ok := false
		for _, k := range knownCrashes {
			if strings.Contains(c, k.signature) {
				found, ok = k, true
				break
			}
		}
		if !ok {
			return knownCrash{}, false
		}
	}
	return found, len(crashes) > 0
}
