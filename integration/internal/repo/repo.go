// Package repo finds the repository the integration commands (rdstest,
// rdsbench, rdsinstr) run in.
package repo

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Root returns the directory of the go.mod that the go command finds from
// the working directory. tool names the command in the error that says to
// run it inside the repository.
func Root(tool string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return rootOf(tool, strings.TrimSpace(string(out)))
}

// rootOf is Root given go env GOMOD's answer.
func rootOf(tool, gomod string) (string, error) {
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run " + tool + " inside the repository (no go.mod found)")
	}
	return filepath.Dir(gomod), nil
}
