module github.com/go-rds/rds

go 1.26.0

require (
	github.com/cavaliergopher/cpio v1.0.1
	github.com/rogpeppe/go-internal v1.16.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.49.0
)

require golang.org/x/tools v0.26.0 // indirect
