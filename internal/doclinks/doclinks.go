// Package doclinks checks the relative links of the repository's Markdown
// files: every [text](path) and reference definition must name a file or
// directory that exists, and a #fragment must name a heading of the
// target Markdown file. Repository paths written as code (`bench/x.c`)
// must exist too, except in CHANGELOG.md, which names paths as they were.
// Its test runs the check over the repository, so the host unit tests
// fail when a document points at something moved or removed.
package doclinks

import (
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Broken is a link or path that does not resolve.
type Broken struct {
	File   string // the Markdown file, relative to the root
	Line   int    // 1-based
	Target string // as written
	Reason string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", b.File, b.Line, b.Target, b.Reason)
}

// Link is a link target or repository path found in a Markdown file.
type Link struct {
	Line   int
	Target string
}

var (
	codeSpan  = regexp.MustCompile("`+[^`]*`+")
	inline    = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	reference = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	scheme    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	heading   = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	linkText  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	lineNo    = regexp.MustCompile(`:[0-9]+$`)
)

// prose yields the lines of a Markdown document outside fenced code
// blocks, with their 1-based numbers.
func prose(doc string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		fence := ""
		for i, line := range strings.Split(doc, "\n") {
			t := strings.TrimSpace(line)
			switch {
			case fence != "":
				if strings.HasPrefix(t, fence) {
					fence = ""
				}
			case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
				fence = t[:3]
			default:
				if !yield(i+1, line) {
					return
				}
			}
		}
	}
}

// Links returns the inline links and reference definitions of a Markdown
// document, outside fenced code blocks and code spans. Indented code
// blocks are read as text: a link-like string there is checked too.
func Links(doc string) []Link {
	var out []Link
	for i, line := range prose(doc) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: i, Target: strings.Trim(m[1], "<>")})
		}
		if m := reference.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: i, Target: strings.Trim(m[1], "<>")})
		}
	}
	return out
}

// CodePaths returns the code spans of a Markdown document, outside fenced
// code blocks, that name a path in the repository: a single word with a
// slash whose first element is one of tops (the repository's top-level
// directories), such as `integration/cmd/rdsvm` or `bench/cbaseline/`.
// A leading ./ and a trailing :LINE are dropped; paths with a testdata
// element (built files) and patterns (*, ..., <name>) are left out.
func CodePaths(doc string, tops map[string]bool) []Link {
	var out []Link
	for i, line := range prose(doc) {
		for _, span := range codeSpan.FindAllString(line, -1) {
			p := strings.TrimPrefix(strings.Trim(span, "`"), "./")
			p = lineNo.ReplaceAllString(p, "")
			if strings.ContainsAny(p, " ,*<>{}$") || strings.Contains(p, "...") {
				continue
			}
			elems := strings.Split(strings.TrimSuffix(p, "/"), "/")
			if len(elems) < 2 || !tops[elems[0]] || slices.Contains(elems, "testdata") {
				continue
			}
			out = append(out, Link{Line: i, Target: p})
		}
	}
	return out
}

// Anchors returns the fragment names GitHub gives the headings of a
// Markdown document.
func Anchors(doc string) map[string]bool {
	anchors := make(map[string]bool)
	seen := make(map[string]int)
	for _, line := range prose(doc) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// Slug is GitHub's fragment name for a heading: the text of its links,
// lower case, without punctuation, spaces as hyphens.
func Slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check reads every Markdown file under root, skipping hidden and testdata
// directories, and returns the relative links that do not resolve (a
// path starting with / is taken from root, as GitHub does) and the
// repository paths in code spans (see CodePaths; relative to root) that
// do not exist, except in CHANGELOG.md.
func Check(root string) ([]Broken, error) {
	var broken []Broken
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	tops := make(map[string]bool)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	anchorsOf := make(map[string]map[string]bool)
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := Anchors(string(doc))
		anchorsOf[path] = a
		return a, nil
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.EqualFold(filepath.Ext(path), ".md") {
			return nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, l := range Links(string(doc)) {
			if reason := resolve(root, path, l.Target, anchors); reason != "" {
				broken = append(broken, Broken{File: filepath.ToSlash(rel), Line: l.Line, Target: l.Target, Reason: reason})
			}
		}
		if filepath.Base(path) == "CHANGELOG.md" {
			return nil // history names paths as they were then
		}
		for _, l := range CodePaths(string(doc), tops) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(l.Target))); err != nil {
				broken = append(broken, Broken{File: filepath.ToSlash(rel), Line: l.Line, Target: l.Target, Reason: "no such path in the repository"})
			}
		}
		return nil
	})
	return broken, err
}

// resolve returns why target, linked from the file at from, does not
// resolve, or "" when it does or is not a relative link.
func resolve(root, from, target string, anchors func(string) (map[string]bool, error)) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // a URL: not checked here
	}
	path, frag, _ := strings.Cut(target, "#")
	if q := strings.IndexByte(path, '?'); q >= 0 {
		path = path[:q]
	}
	file := from
	if path != "" {
		if strings.HasPrefix(path, "/") {
			file = filepath.Join(root, filepath.FromSlash(path))
		} else {
			file = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		}
		if _, err := os.Stat(file); err != nil {
			return "no such file or directory"
		}
	}
	if frag == "" || !strings.EqualFold(filepath.Ext(file), ".md") {
		return ""
	}
	a, err := anchors(file)
	if err != nil {
		return err.Error()
	}
	if !a[strings.ToLower(frag)] {
		return "no heading for #" + frag
	}
	return ""
}
