//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCReferenceSources checks that every C reference source exists where
// rdstest compiles it from, and that each binary lands in a package's
// testdata/, so a moved file breaks this test rather than a CI run.
func TestCReferenceSources(t *testing.T) {
	root := filepath.Join("..", "..", "..") // the module root
	for _, c := range cReferences {
		if _, err := os.Stat(filepath.Join(root, c.src)); err != nil {
			t.Errorf("C reference source: %v", err)
		}
		if filepath.Base(filepath.Dir(c.bin)) != "testdata" {
			t.Errorf("%s: not in a package's testdata/", c.bin)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.Dir(filepath.Dir(c.bin)))); err != nil {
			t.Errorf("package of %s: %v", c.bin, err)
		}
	}
}
