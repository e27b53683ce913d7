//go:build linux

package kernel

import (
	"reflect"
	"strings"
	"testing"
)

func TestClosure(t *testing.T) {
	const dep = `kernel/net/rds/rds.ko.xz:
kernel/net/rds/rds_tcp.ko.xz: kernel/net/rds/rds.ko.xz
kernel/net/rds/rds_rdma.ko.xz: kernel/drivers/infiniband/core/rdma_cm.ko.xz kernel/drivers/infiniband/core/ib_core.ko.xz kernel/net/rds/rds.ko.xz
kernel/drivers/infiniband/core/ib_core.ko.xz:
kernel/drivers/infiniband/core/rdma_cm.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/net/veth.ko:
`
	deps, err := ParseModulesDep(strings.NewReader(dep))
	if err != nil {
		t.Fatal(err)
	}
	db := &ModuleDB{deps: deps, builtin: map[string]bool{"virtio_pci": true}}
	got, err := db.Closure([]string{"rds-tcp", "rds_rdma", "virtio_pci", "veth"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/net/rds/rds.ko.xz",
		"kernel/net/rds/rds_tcp.ko.xz",
		"kernel/drivers/infiniband/core/ib_core.ko.xz",
		"kernel/drivers/infiniband/core/rdma_cm.ko.xz",
		"kernel/net/rds/rds_rdma.ko.xz",
		"kernel/drivers/net/veth.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Closure:\n got %q\nwant %q", got, want)
	}
	_, err = db.Closure([]string{"rds", "no_such_module"})
	if err == nil || !strings.Contains(err.Error(), "no_such_module") {
		t.Fatalf("missing module: got error %v, want one naming no_such_module", err)
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/net/rds/rds_tcp.ko.xz": "rds_tcp",
		"rds-tcp":                      "rds_tcp",
		"veth.ko":                      "veth",
		"a/b/crc32_generic.ko.zst":     "crc32_generic",
	} {
		if got := ModuleName(in); got != want {
			t.Errorf("ModuleName(%q) = %q, want %q", in, got, want)
		}
	}
}
