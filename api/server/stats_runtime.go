package server

import (
	"github.com/evjournal/containerd/runtime"
	runc "github.com/containerd/go-runc"
)

// runcStats takes what statsToProto needs out of the runtime's sample: runc's
// statistics and the hugetlb limits by page size (nil when unknown).
func runcStats(st *runtime.Stats) (*runc.Stats, map[string]uint64) {
	if st == nil {
		return nil, nil
	}
	return &st.Stats, nil
}
