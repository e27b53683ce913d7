package cli

// rdmaDemo is where the tour shows an RDMA WRITE with immediate data once
// package rdmaops can do it; until then the tour says so and moves on.
func rdmaDemo(tr *tour, t topology) {
	if !t.ib1.IsValid() {
		return
	}
	tr.section("RDMA WRITE with immediate data: not in this build (rdscat rdma is waiting for package rdmaops)")
}
