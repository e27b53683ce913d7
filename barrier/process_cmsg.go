//go:build linux

package barrier

import (
	"io"

	"github.com/go-rds/rds/cmsg"
)

// Process resolves every RDS_CMSG_RDMA_STATUS notice in oob, the control
// bytes of one received message (oob[:oobn] from rdssock's ReadMsg), and
// returns how many notices it found. Other control messages are left to
// the caller. Notices for tokens this tracker does not have pending are
// counted in Stats (Unmatched or Late). A malformed buffer stops the walk
// with the cmsg error; the notices before it are still applied.
//
// Process does not allocate.
func (t *Tracker) Process(oob []byte) (int, error) {
	p := cmsg.NewParser(oob)
	n := 0
	for {
		m, err := p.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if !m.Is(cmsg.LevelRDS, cmsg.TypeRDMAStatus) {
			continue
		}
		st, err := m.RDMAStatus()
		if err != nil {
			return n, err
		}
		n++
		t.Complete(Token(st.UserToken), FromKernel(int32(st.Status)))
	}
}
