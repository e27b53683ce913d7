// Package rdmaatomics records, in a VM of its own, that Soft-RoCE cannot
// run RDS atomics: an atomic wedges its connection, so this test must not
// share a VM with others.
package rdmaatomics
