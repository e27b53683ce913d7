package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoot(t *testing.T) {
	root, err := Root("repotest")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("Root = %s, which has no go.mod: %v", root, err)
	}
	for _, gomod := range []string{"", os.DevNull} {
		if _, err := rootOf("repotest", gomod); err == nil || !strings.Contains(err.Error(), "run repotest inside the repository") {
			t.Errorf("rootOf(%q) = %v; want the error naming the tool", gomod, err)
		}
	}
}
