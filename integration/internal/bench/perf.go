package bench

import "path/filepath"

// PerfRecord returns the command that runs bin with args under perf record
// (software CPU-clock samples at 4 kHz, which work in a guest without a
// PMU), writing its samples to out. dir holds perf, its shared libraries
// and their loader as ld.so, so that perf runs where it is not installed
// (the test VM): the loader starts perf with dir as its library path.
func PerfRecord(dir, out, bin string, args []string) (string, []string) {
	a := []string{"--library-path", dir, filepath.Join(dir, "perf"), "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", out, "--", bin}
	return filepath.Join(dir, "ld.so"), append(a, args...)
}

// PerfReport returns the command that prints the report of the samples in
// data, self time only, sorted by sort ("dso": the share of the kernel,
// the program and each library; "dso,sym": of each function), down to
// 0.3%.
func PerfReport(dir, data, sort string) (string, []string) {
	return filepath.Join(dir, "ld.so"), []string{"--library-path", dir, filepath.Join(dir, "perf"), "report", "-i", data, "--stdio", "--no-children", "--sort", sort, "--percent-limit", "0.3"}
}
