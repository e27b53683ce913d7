//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// cReferences are plain C programs that integration tests run in their
// VM, next to the Go code, as the reference for kernel behaviour a test
// may accept (the rule: a kernel deviation is accepted only as far as C
// shows it in the same VM run). Each is compiled on the host, statically
// (the guest has no libc), into the package's testdata/, which rdsvm
// copies into the VM.
var cReferences = []struct{ src, bin string }{
	{"integration/internal/bench/cbaseline/useonce.c", "integration/rdmafaults/testdata/useonce-c"},
	{"integration/internal/bench/cbaseline/useonce.c", "integration/testdata/useonce-c"},
	{"integration/internal/bench/cbaseline/rdsfault.c", "integration/reliability/testdata/rdsfault-c"},
	{"integration/internal/bench/cbaseline/rdsfault.c", "integration/testdata/rdsfault-c"},
	{"integration/internal/bench/cbaseline/resetstall.c", "examples/rdmawrite/testdata/resetstall-c"},
}

// buildCReferences compiles cReferences, relative to the repository root.
func buildCReferences(root string) error {
	for _, c := range cReferences {
		bin := filepath.Join(root, c.bin)
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return err
		}
		cmd := exec.Command("gcc", "-O2", "-static", "-Wall", "-Wextra", "-Werror", "-o", bin, filepath.Join(root, c.src))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("gcc %s: %w", c.src, err)
		}
		fmt.Printf("built %s\n", c.bin)
	}
	return nil
}
