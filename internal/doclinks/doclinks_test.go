package doclinks

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRepositoryLinks checks the links and code-span paths of every
// Markdown file of the repository.
func TestRepositoryLinks(t *testing.T) {
	root := repoRoot(t)
	broken, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Errorf("%v", b)
	}
	if t.Failed() {
		t.Log("fix the document: links are relative to the file that holds them, paths written as code to the repository root")
	}
}

// TestCheckFixture runs the check over a tree with known good and broken
// links, so that a check that finds nothing cannot pass unnoticed.
func TestCheckFixture(t *testing.T) {
	broken, err := Check(filepath.Join("testdata", "tree"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range broken {
		got = append(got, b.String())
	}
	want := []string{
		"README.md:9: docs/gone.md: no such file or directory",
		"README.md:9: docs/guide.md#no-such-part: no heading for #no-such-part",
		"README.md:16: docs/absent.txt: no such file or directory",
		"README.md:19: docs/moved.go: no such path in the repository",
		"docs/guide.md:5: #third-part: no heading for #third-part",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Check found\n%q\nwant\n%q", got, want)
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Kernel defects measured", "kernel-defects-measured"},
		{"Two VMs (`{\"vms\": 2}`)", "two-vms-vms-2"},
		{"rdsvm.json", "rdsvmjson"},
		{"v0.7.0 - 2026-11-25", "v070---2026-11-25"},
		{"[Unreleased]", "unreleased"},
		{"See [TESTING.md](TESTING.md)", "see-testingmd"},
		{"RDS_INFO tables", "rds_info-tables"},
	} {
		if got := Slug(c.in); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAnchorsDuplicates(t *testing.T) {
	a := Anchors("# A\n## A\n```\n# not a heading\n```\n### A\n")
	for _, w := range []string{"a", "a-1", "a-2"} {
		if !a[w] {
			t.Errorf("no anchor %q in %v", w, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a fenced block was taken as a heading")
	}
}

// repoRoot finds the directory holding go.mod above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
