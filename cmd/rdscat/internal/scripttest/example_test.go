//go:build linux

package scripttest_test

import (
	"fmt"

	"github.com/go-rds/rds/cmd/rdscat/internal/scripttest"
)

// Lookup reads one value out of rdscat's JSON output, as the jsonfield
// and jsonsame script commands do.
func ExampleLookup() {
	doc := []byte(`{"sender": {"sent": 1165, "latency_us": {"p99": 64.5}}, "replies": [{"seq": 1}]}`)
	for _, path := range []string{"sender.sent", "sender.latency_us.p99", "replies.0.seq"} {
		v, err := scripttest.Lookup(doc, path)
		fmt.Println(path, v, err)
	}
	// Output:
	// sender.sent 1165 <nil>
	// sender.latency_us.p99 64.5 <nil>
	// replies.0.seq 1 <nil>
}

// Cmds adds rdscat's script commands to testscript.Params.Cmds.
func ExampleCmds() {
	cmds := scripttest.Cmds()
	_, ok := cmds["exits"]
	fmt.Println(len(cmds), ok)
	// Output: 6 true
}
