// Package twovmhostile runs block-server tests whose hostile peer must be
// remote (its rdsvm.json asks for {"vms": 2}): the server in the main VM,
// a slow client in the peer VM behind a netem delay on the main VM's
// link, and a well-behaved client in the main VM.
package twovmhostile
