package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	gorunc "github.com/containerd/go-runc"
)

// Stats is one sample of the container's cgroup statistics.
type Stats struct {
	gorunc.Stats                    // the "data" object of `runc events --stats`
	HugetlbLimits map[string]uint64 // limit in bytes by page size (the keys of Hugetlb); nil when unknown
	SystemUsage   uint64            // host CPU time in ns from /proc/stat (v0.2's system_usage); 0 if unreadable
	Timestamp     time.Time         // when the sample was taken
}

// Stats runs `runc events --stats <id>` once.
func (c *Container) Stats(ctx context.Context) (*Stats, error) {
	s, err := c.runcStats(ctx)
	if err == nil && s == nil {
		err = errors.New("runc events --stats gave no data")
	}
	if err != nil {
		// go-runc reads only runc's stdout here; runc state says why it failed.
		if _, serr := c.runc().State(ctx, c.rec.ID); serr != nil {
			return nil, c.runcError(ctx, "events", serr)
		}
		return nil, fmt.Errorf("container %q: events --stats: %w", c.rec.ID, err)
	}
	usage, _ := systemCPUUsage()
	out := &Stats{Stats: *s, SystemUsage: usage, Timestamp: time.Now()}
	if len(s.Hugetlb) > 0 {
		out.HugetlbLimits = c.hugetlbLimits(mapKeys(s.Hugetlb))
	}
	return out, nil
}

// runcStats runs `runc [args] events --stats <id>` and decodes its one
// event. Not go-runc's Stats: it reads runc's stdout pipe while its process
// monitor already calls cmd.Wait, which closes that pipe once runc exits, so
// a quick runc made it fail now and then with "read |0: file already closed".
func (c *Container) runcStats(ctx context.Context) (*gorunc.Stats, error) {
	args := append(append([]string{}, c.rec.RuntimeArgs...), "events", "--stats", c.rec.ID)
	out, err := exec.CommandContext(ctx, c.rec.Runtime, args...).Output()
	if err != nil {
		return nil, err
	}
	var ev gorunc.Event
	if err := json.Unmarshal(out, &ev); err != nil {
		return nil, fmt.Errorf("decode runc events --stats: %w", err)
	}
	return ev.Stats, nil
}

// clockTicks is USER_HZ, the unit of /proc/stat; 100 on every Linux ABI.
const clockTicks = 100

// systemCPUUsage sums the first seven fields of /proc/stat's "cpu" line
// (user nice system idle iowait irq softirq), in nanoseconds, as v0.2 did.
func systemCPUUsage() (uint64, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[0] != "cpu" {
			continue
		}
		var total uint64
		for _, v := range fields[1:8] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat: %w", err)
			}
			total += n
		}
		return total * (uint64(time.Second) / clockTicks), nil
	}
	return 0, errors.New("/proc/stat: no cpu line")
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
