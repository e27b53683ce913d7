package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// deviationPrefix starts the line a reliability test logs for every kernel
// deviation from the delivery promise it judged (the format is in
// integration/reliability/doc.go):
//
//	DEVIATION|<signature>|kernel=<release>|test=<name>|go=<n>|bound=<n>|c=<n>|basis=<bounds|c|none>|strict=<0|1>
const deviationPrefix = "DEVIATION|"

// kernelDeviation is one DEVIATION line.
type kernelDeviation struct {
	signature, kernel, test string
	goCount, bound, c       int // bound and c: -1 when there was none
	basis                   string
	strict                  bool
}

// accepted reports whether the test let the deviation pass: with a basis
// (within the bounds read at the fault, or no more than the C reference
// showed in the same run), or without one outside strict mode.
func (d kernelDeviation) accepted() bool { return d.basis != "none" || !d.strict }

// parseDeviation parses the part of a DEVIATION line after its prefix.
func parseDeviation(row string) (kernelDeviation, error) {
	fields := strings.Split(strings.TrimSpace(row), "|")
	d := kernelDeviation{signature: fields[0], bound: -1, c: -1}
	if d.signature == "" {
		return d, fmt.Errorf("DEVIATION line %q: no signature", row)
	}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return d, fmt.Errorf("DEVIATION line %q: field %q is not key=value", row, f)
		}
		seen[k] = true
		var err error
		switch k {
		case "kernel":
			d.kernel = v
		case "test":
			d.test = v
		case "go":
			d.goCount, err = strconv.Atoi(v)
		case "bound":
			d.bound, err = strconv.Atoi(v)
		case "c":
			d.c, err = strconv.Atoi(v)
		case "basis":
			if v != "bounds" && v != "c" && v != "none" {
				err = fmt.Errorf("unknown basis %q", v)
			}
			d.basis = v
		case "strict":
			d.strict = v == "1"
		}
		if err != nil {
			return d, fmt.Errorf("DEVIATION line %q: %s: %w", row, k, err)
		}
	}
	for _, k := range []string{"kernel", "test", "go", "basis", "strict"} {
		if !seen[k] {
			return d, fmt.Errorf("DEVIATION line %q: no %s", row, k)
		}
	}
	return d, nil
}

// deviationRows collects the DEVIATION lines of every test, passing or not.
var deviationRows []string

// deviationSummary turns DEVIATION lines into summary lines: one per line,
// sorted by kernel, with what the Go run showed, the bound read from the
// kernel at the fault, what the C reference showed in the same run, and
// the verdict. A line that does not parse is reported as such.
func deviationSummary(rows []string) []string {
	if len(rows) == 0 {
		return nil
	}
	var ds []kernelDeviation
	var out []string
	for _, r := range rows {
		d, err := parseDeviation(r)
		if err != nil {
			out = append(out, "  "+err.Error())
			continue
		}
		ds = append(ds, d)
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].kernel < ds[j].kernel })
	num := func(n int) string {
		if n < 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	head := []string{"kernel deviations judged (accepted only within the bounds read from the kernel at the fault, or up to what the C reference showed under the same fault in the same run):"}
	for _, d := range ds {
		verdict := "accepted"
		switch {
		case !d.accepted():
			verdict = "FAILED (strict: no basis)"
		case d.basis == "none":
			verdict = "accepted without a basis (not strict)"
		case d.basis == "bounds":
			verdict = "accepted: within bounds"
		case d.basis == "c":
			verdict = "accepted: reproduced in C"
		}
		head = append(head, fmt.Sprintf("  kernel %s: %s in %s: Go %d, bound %s, C %s; %s",
			d.kernel, d.signature, d.test, d.goCount, num(d.bound), num(d.c), verdict))
	}
	return append(head, out...)
}
