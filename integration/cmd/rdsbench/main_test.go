package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProfilesRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string][]byte{
		"rr_tcp_1x1_64B-20010-sender.pprof":   {0x1f, 0x8b, 1, 2, 3},
		"rr_tcp_1x1_64B-20010-receiver.pprof": bytes.Repeat([]byte{0x1f, 0x8b, 0xff}, 5000),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	out.WriteString("progress line\n" + jsonBegin + "\n{}\n" + jsonEnd + "\n")
	if err := printProfiles(&out, src); err != nil {
		t.Fatal(err)
	}
	out.WriteString("rdsvm: the VM finished\n")
	paths, err := extractProfiles(out.Bytes(), filepath.Join(t.TempDir(), "got"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(files) {
		t.Fatalf("%d profiles extracted, want %d", len(paths), len(files))
	}
	for _, p := range paths {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := files[filepath.Base(p)]; !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes differ from the %d written", filepath.Base(p), len(got), len(want))
		}
	}
}

func TestExtractProfilesRefuses(t *testing.T) {
	for _, c := range []struct{ name, out, want string }{
		{"none", "no profiles here\n", "no profiles"},
		{"path in the name", profileLine + " ../evil.pprof AAAA\n", "malformed"},
		{"not a profile name", profileLine + " notes.txt AAAA\n", "malformed"},
		{"bad base64", profileLine + " a.pprof !!!\n", "a.pprof"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := extractProfiles([]byte(c.out), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}
