package harness

import (
	"slices"
	"testing"
)

// TestSplitRule: a rule of iptables-save, its comment quoted with escaped
// quotes, splits into the arguments iptables -D takes back.
func TestSplitRule(t *testing.T) {
	line := `-A CNI-cfc87d37918c1cdfa153b83e ! -d 224.0.0.0/4 -m comment --comment "name: \"cri-ours-b1\" id: \"4f63\"" -j MASQUERADE`
	want := []string{"-A", "CNI-cfc87d37918c1cdfa153b83e", "!", "-d", "224.0.0.0/4", "-m", "comment", "--comment",
		`name: "cri-ours-b1" id: "4f63"`, "-j", "MASQUERADE"}
	if got := splitRule(line); !slices.Equal(got, want) {
		t.Errorf("splitRule:\n got %q\nwant %q", got, want)
	}
	if !perPodChain.MatchString("CNI-cfc87d37918c1cdfa153b83e") || !perPodChain.MatchString("CNI-DN-cfc87d37918c1cdfa153b83") ||
		perPodChain.MatchString("CNI-HOSTPORT-DNAT") || perPodChain.MatchString("CNI-FORWARD") {
		t.Error("perPodChain tells a pod's chain from the shared ones wrongly")
	}
}
