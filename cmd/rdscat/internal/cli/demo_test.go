//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeClone makes a directory with the layout and go.mod of this module.
func fakeClone(t *testing.T, module string) (root, file string) {
	t.Helper()
	root = t.TempDir()
	file = filepath.Join(root, demoFile)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("package cli\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, file
}

// TestModuleRootIgnoresCurrentDirectory: a go.mod with the right module
// line in the current directory, which the binary was not built from, is
// never chosen: the root is where this file was compiled from.
func TestModuleRootIgnoresCurrentDirectory(t *testing.T) {
	fake, _ := fakeClone(t, modulePath)
	t.Chdir(fake)
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("moduleRoot from a test of this module: %v", err)
	}
	if root == fake {
		t.Fatalf("moduleRoot chose the current directory %s", fake)
	}
	_, self, _, _ := runtime.Caller(0)
	if want := filepath.Clean(strings.TrimSuffix(self, "cmd/rdscat/internal/cli/demo_test.go")); root != want {
		t.Fatalf("moduleRoot = %s, want the build's source %s", root, want)
	}
}

func TestCheckModuleRoot(t *testing.T) {
	euid := os.Geteuid()
	good, goodFile := fakeClone(t, modulePath)
	if root, err := checkModuleRoot(modulePath, goodFile, euid, -1); err != nil || root != good {
		t.Fatalf("a proper clone: %q, %v", root, err)
	}
	refuse := func(name, mainPath, file string, euid, sudo int, want string) {
		t.Helper()
		root, err := checkModuleRoot(mainPath, file, euid, sudo)
		if err == nil {
			t.Errorf("%s: accepted %s", name, root)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", name, err, want)
		}
	}
	refuse("another main module", "example.com/evil", goodFile, euid, -1, `main module is "example.com/evil"`)
	refuse("trimmed path", modulePath, modulePath+"/"+demoFile, euid, -1, "without its source path")
	refuse("not demo.go", modulePath, filepath.Join(good, "x.go"), euid, -1, "without its source path")
	_, wrongFile := fakeClone(t, "example.com/evil")
	refuse("wrong module line", modulePath, wrongFile, euid, -1, "no longer holds the go.mod of "+modulePath)

	ww, wwFile := fakeClone(t, modulePath)
	if err := os.Chmod(ww, 0o777); err != nil {
		t.Fatal(err)
	}
	refuse("world-writable directory", modulePath, wwFile, euid, -1, "writable by every user")
	gm, gmFile := fakeClone(t, modulePath)
	if err := os.Chmod(filepath.Join(gm, "go.mod"), 0o666); err != nil {
		t.Fatal(err)
	}
	refuse("world-writable go.mod", modulePath, gmFile, euid, -1, "writable by every user")

	// Owned by someone else. Only root can hand a directory to another
	// uid; a user claims to be another one instead.
	other, otherFile := fakeClone(t, modulePath)
	owner := euid
	if euid == 0 {
		owner = 4242
		for _, p := range []string{other, filepath.Join(other, "go.mod")} {
			if err := os.Chown(p, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := checkModuleRoot(modulePath, otherFile, 0, owner); err != nil {
			t.Errorf("root via sudo in the clone of the user who ran sudo: %v", err)
		}
		refuse("root, the clone of a user who did not run sudo", modulePath, otherFile, 0, 4343, "owned by uid 4242")
	}
	refuse("owned by another user", modulePath, otherFile, owner+1, -1, "neither you")
}
