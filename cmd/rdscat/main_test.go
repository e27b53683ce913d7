//go:build linux

package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/go-rds/rds/cmd/rdscat/internal/cli"
	"github.com/go-rds/rds/cmd/rdscat/internal/scripttest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"rdscat": func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar: help, flags and every bad input
// rdscat can reject on a host without AF_RDS. The kernel-backed behaviour is
// tested in integration_linux_test.go (go test -tags integration in the VM).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: scripttest.Cmds(),
		Condition: func(cond string) (bool, error) {
			if cond == "rds" {
				return scripttest.HasRDS(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
