//go:build linux

package cli_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/go-rds/rds/cmd/rdscat/internal/cli"
)

// Main runs one rdscat command line; a bad address is a usage error (2)
// found before any socket is made.
func ExampleMain() {
	var stderr strings.Builder
	code := cli.Main([]string{"listen", "10.0.0.1"}, os.Stdin, os.Stdout, &stderr)
	fmt.Println(code, strings.SplitN(stderr.String(), "\n", 2)[0])
	// Output: 2 rdscat listen: bad listen address "10.0.0.1": a port is missing, for example 10.0.0.1:4000
}
