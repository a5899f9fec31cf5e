package types

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// field is one field of v0.2.9's proto (docs/api.md 2.1), written the
// way v0.2.9's proto writes it: message types without the "types." prefix, maps as
// "map<K,V>", label "singular", "repeated" or "map".
type field struct {
	num   protowire.Number
	name  string
	typ   string
	label string
}

// v029Messages are the 46 messages of v0.2.9 (docs/api.md 2.1), in file
// order, field by field. Never edit a row to make a test pass: a mismatch is a
// wire break.
var v029Messages = []struct {
	name   string
	fields []field
}{
	{"GetServerVersionRequest", nil},
	{"GetServerVersionResponse", []field{
		{1, "major", "uint32", "singular"},
		{2, "minor", "uint32", "singular"},
		{3, "patch", "uint32", "singular"},
		{4, "revision", "string", "singular"},
	}},
	{"UpdateProcessRequest", []field{
		{1, "id", "string", "singular"},
		{2, "pid", "string", "singular"},
		{3, "closeStdin", "bool", "singular"},
		{4, "width", "uint32", "singular"},
		{5, "height", "uint32", "singular"},
	}},
	{"UpdateProcessResponse", nil},
	{"CreateContainerRequest", []field{
		{1, "id", "string", "singular"},
		{2, "bundlePath", "string", "singular"},
		{3, "checkpoint", "string", "singular"},
		{4, "stdin", "string", "singular"},
		{5, "stdout", "string", "singular"},
		{6, "stderr", "string", "singular"},
		{7, "labels", "string", "repeated"},
		{8, "noPivotRoot", "bool", "singular"},
		{9, "runtime", "string", "singular"},
		{10, "runtimeArgs", "string", "repeated"},
		{11, "checkpointDir", "string", "singular"},
	}},
	{"CreateContainerResponse", []field{
		{1, "container", "Container", "singular"},
	}},
	{"SignalRequest", []field{
		{1, "id", "string", "singular"},
		{2, "pid", "string", "singular"},
		{3, "signal", "uint32", "singular"},
	}},
	{"SignalResponse", nil},
	{"AddProcessRequest", []field{
		{1, "id", "string", "singular"},
		{2, "terminal", "bool", "singular"},
		{3, "user", "User", "singular"},
		{4, "args", "string", "repeated"},
		{5, "env", "string", "repeated"},
		{6, "cwd", "string", "singular"},
		{7, "pid", "string", "singular"},
		{8, "stdin", "string", "singular"},
		{9, "stdout", "string", "singular"},
		{10, "stderr", "string", "singular"},
		{11, "capabilities", "string", "repeated"},
		{12, "apparmorProfile", "string", "singular"},
		{13, "selinuxLabel", "string", "singular"},
		{14, "noNewPrivileges", "bool", "singular"},
		{15, "rlimits", "Rlimit", "repeated"},
	}},
	{"Rlimit", []field{
		{1, "type", "string", "singular"},
		{2, "soft", "uint64", "singular"},
		{3, "hard", "uint64", "singular"},
	}},
	{"User", []field{
		{1, "uid", "uint32", "singular"},
		{2, "gid", "uint32", "singular"},
		{3, "additionalGids", "uint32", "repeated"},
	}},
	{"AddProcessResponse", []field{
		{1, "systemPid", "uint32", "singular"},
	}},
	{"CreateCheckpointRequest", []field{
		{1, "id", "string", "singular"},
		{2, "checkpoint", "Checkpoint", "singular"},
		{3, "checkpointDir", "string", "singular"},
	}},
	{"CreateCheckpointResponse", nil},
	{"DeleteCheckpointRequest", []field{
		{1, "id", "string", "singular"},
		{2, "name", "string", "singular"},
		{3, "checkpointDir", "string", "singular"},
	}},
	{"DeleteCheckpointResponse", nil},
	{"ListCheckpointRequest", []field{
		{1, "id", "string", "singular"},
		{2, "checkpointDir", "string", "singular"},
	}},
	{"Checkpoint", []field{
		{1, "name", "string", "singular"},
		{2, "exit", "bool", "singular"},
		{3, "tcp", "bool", "singular"},
		{4, "unixSockets", "bool", "singular"},
		{5, "shell", "bool", "singular"},
		{6, "emptyNS", "string", "repeated"},
	}},
	{"ListCheckpointResponse", []field{
		{1, "checkpoints", "Checkpoint", "repeated"},
	}},
	{"StateRequest", []field{
		{1, "id", "string", "singular"},
	}},
	{"ContainerState", []field{
		{1, "status", "string", "singular"},
	}},
	{"Process", []field{
		{1, "pid", "string", "singular"},
		{2, "terminal", "bool", "singular"},
		{3, "user", "User", "singular"},
		{4, "args", "string", "repeated"},
		{5, "env", "string", "repeated"},
		{6, "cwd", "string", "singular"},
		{7, "systemPid", "uint32", "singular"},
		{8, "stdin", "string", "singular"},
		{9, "stdout", "string", "singular"},
		{10, "stderr", "string", "singular"},
		{11, "capabilities", "string", "repeated"},
		{12, "apparmorProfile", "string", "singular"},
		{13, "selinuxLabel", "string", "singular"},
		{14, "noNewPrivileges", "bool", "singular"},
		{15, "rlimits", "Rlimit", "repeated"},
	}},
	{"Container", []field{
		{1, "id", "string", "singular"},
		{2, "bundlePath", "string", "singular"},
		{3, "processes", "Process", "repeated"},
		{4, "status", "string", "singular"},
		{5, "labels", "string", "repeated"},
		{6, "pids", "uint32", "repeated"},
		{7, "runtime", "string", "singular"},
	}},
	{"Machine", []field{
		{1, "cpus", "uint32", "singular"},
		{2, "memory", "uint64", "singular"},
	}},
	{"StateResponse", []field{
		{1, "containers", "Container", "repeated"},
		{2, "machine", "Machine", "singular"},
	}},
	{"UpdateContainerRequest", []field{
		{1, "id", "string", "singular"},
		{2, "pid", "string", "singular"},
		{3, "status", "string", "singular"},
		{4, "resources", "UpdateResource", "singular"},
	}},
	{"UpdateResource", []field{
		{1, "blkioWeight", "uint64", "singular"},
		{2, "cpuShares", "uint64", "singular"},
		{3, "cpuPeriod", "uint64", "singular"},
		{4, "cpuQuota", "uint64", "singular"},
		{5, "cpusetCpus", "string", "singular"},
		{6, "cpusetMems", "string", "singular"},
		{7, "memoryLimit", "uint64", "singular"},
		{8, "memorySwap", "uint64", "singular"},
		{9, "memoryReservation", "uint64", "singular"},
		{10, "kernelMemoryLimit", "uint64", "singular"},
		{11, "kernelTCPMemoryLimit", "uint64", "singular"},
		{12, "blkioLeafWeight", "uint64", "singular"},
		{13, "blkioWeightDevice", "WeightDevice", "repeated"},
		{14, "blkioThrottleReadBpsDevice", "ThrottleDevice", "repeated"},
		{15, "blkioThrottleWriteBpsDevice", "ThrottleDevice", "repeated"},
		{16, "blkioThrottleReadIopsDevice", "ThrottleDevice", "repeated"},
		{17, "blkioThrottleWriteIopsDevice", "ThrottleDevice", "repeated"},
		{18, "pidsLimit", "uint64", "singular"},
	}},
	{"BlockIODevice", []field{
		{1, "major", "int64", "singular"},
		{2, "minor", "int64", "singular"},
	}},
	{"WeightDevice", []field{
		{1, "blkIODevice", "BlockIODevice", "singular"},
		{2, "weight", "uint32", "singular"},
		{3, "leafWeight", "uint32", "singular"},
	}},
	{"ThrottleDevice", []field{
		{1, "blkIODevice", "BlockIODevice", "singular"},
		{2, "rate", "uint64", "singular"},
	}},
	{"UpdateContainerResponse", nil},
	{"EventsRequest", []field{
		{2, "timestamp", "google.protobuf.Timestamp", "singular"},
		{3, "storedOnly", "bool", "singular"},
		{4, "id", "string", "singular"},
	}},
	{"Event", []field{
		{1, "type", "string", "singular"},
		{2, "id", "string", "singular"},
		{3, "status", "uint32", "singular"},
		{4, "pid", "string", "singular"},
		{6, "timestamp", "google.protobuf.Timestamp", "singular"},
	}},
	{"NetworkStats", []field{
		{1, "name", "string", "singular"},
		{2, "rx_bytes", "uint64", "singular"},
		{3, "rx_Packets", "uint64", "singular"},
		{4, "Rx_errors", "uint64", "singular"},
		{5, "Rx_dropped", "uint64", "singular"},
		{6, "Tx_bytes", "uint64", "singular"},
		{7, "Tx_packets", "uint64", "singular"},
		{8, "Tx_errors", "uint64", "singular"},
		{9, "Tx_dropped", "uint64", "singular"},
	}},
	{"CpuUsage", []field{
		{1, "total_usage", "uint64", "singular"},
		{2, "percpu_usage", "uint64", "repeated"},
		{3, "usage_in_kernelmode", "uint64", "singular"},
		{4, "usage_in_usermode", "uint64", "singular"},
	}},
	{"ThrottlingData", []field{
		{1, "periods", "uint64", "singular"},
		{2, "throttled_periods", "uint64", "singular"},
		{3, "throttled_time", "uint64", "singular"},
	}},
	{"CpuStats", []field{
		{1, "cpu_usage", "CpuUsage", "singular"},
		{2, "throttling_data", "ThrottlingData", "singular"},
		{3, "system_usage", "uint64", "singular"},
	}},
	{"PidsStats", []field{
		{1, "current", "uint64", "singular"},
		{2, "limit", "uint64", "singular"},
	}},
	{"MemoryData", []field{
		{1, "usage", "uint64", "singular"},
		{2, "max_usage", "uint64", "singular"},
		{3, "failcnt", "uint64", "singular"},
		{4, "limit", "uint64", "singular"},
	}},
	{"MemoryStats", []field{
		{1, "cache", "uint64", "singular"},
		{2, "usage", "MemoryData", "singular"},
		{3, "swap_usage", "MemoryData", "singular"},
		{4, "kernel_usage", "MemoryData", "singular"},
		{5, "stats", "map<string,uint64>", "map"},
	}},
	{"BlkioStatsEntry", []field{
		{1, "major", "uint64", "singular"},
		{2, "minor", "uint64", "singular"},
		{3, "op", "string", "singular"},
		{4, "value", "uint64", "singular"},
	}},
	{"BlkioStats", []field{
		{1, "io_service_bytes_recursive", "BlkioStatsEntry", "repeated"},
		{2, "io_serviced_recursive", "BlkioStatsEntry", "repeated"},
		{3, "io_queued_recursive", "BlkioStatsEntry", "repeated"},
		{4, "io_service_time_recursive", "BlkioStatsEntry", "repeated"},
		{5, "io_wait_time_recursive", "BlkioStatsEntry", "repeated"},
		{6, "io_merged_recursive", "BlkioStatsEntry", "repeated"},
		{7, "io_time_recursive", "BlkioStatsEntry", "repeated"},
		{8, "sectors_recursive", "BlkioStatsEntry", "repeated"},
	}},
	{"HugetlbStats", []field{
		{1, "usage", "uint64", "singular"},
		{2, "max_usage", "uint64", "singular"},
		{3, "failcnt", "uint64", "singular"},
		{4, "limit", "uint64", "singular"},
	}},
	{"CgroupStats", []field{
		{1, "cpu_stats", "CpuStats", "singular"},
		{2, "memory_stats", "MemoryStats", "singular"},
		{3, "blkio_stats", "BlkioStats", "singular"},
		{4, "hugetlb_stats", "map<string,HugetlbStats>", "map"},
		{5, "pids_stats", "PidsStats", "singular"},
	}},
	{"StatsResponse", []field{
		{1, "network_stats", "NetworkStats", "repeated"},
		{2, "cgroup_stats", "CgroupStats", "singular"},
		{4, "timestamp", "google.protobuf.Timestamp", "singular"},
	}},
	{"StatsRequest", []field{
		{1, "id", "string", "singular"},
	}},
}

// v029Reserved are the retired timestamp tags (docs/api.md 2.1).
var v029Reserved = map[string][]protowire.Number{
	"EventsRequest": {1},
	"Event":         {5},
	"StatsResponse": {3},
}

// extensions are this project's additions: new numbers only, zero value means
// v0.2.9 behaviour.
var extensions = map[string][]field{
	"Event":         {{7, "seq", "uint64", "singular"}, {8, "journalId", "string", "singular"}, {9, "exited_at", "google.protobuf.Timestamp", "singular"}},
	"EventsRequest": {{5, "afterSeq", "uint64", "singular"}, {6, "journalId", "string", "singular"}},
}

// v029Methods is docs/api.md 1.2, in declaration order.
var v029Methods = []struct {
	name, in, out string
	serverStream  bool
}{
	{"GetServerVersion", "GetServerVersionRequest", "GetServerVersionResponse", false},
	{"CreateContainer", "CreateContainerRequest", "CreateContainerResponse", false},
	{"UpdateContainer", "UpdateContainerRequest", "UpdateContainerResponse", false},
	{"Signal", "SignalRequest", "SignalResponse", false},
	{"UpdateProcess", "UpdateProcessRequest", "UpdateProcessResponse", false},
	{"AddProcess", "AddProcessRequest", "AddProcessResponse", false},
	{"CreateCheckpoint", "CreateCheckpointRequest", "CreateCheckpointResponse", false},
	{"DeleteCheckpoint", "DeleteCheckpointRequest", "DeleteCheckpointResponse", false},
	{"ListCheckpoint", "ListCheckpointRequest", "ListCheckpointResponse", false},
	{"State", "StateRequest", "StateResponse", false},
	{"Events", "EventsRequest", "Event", true},
	{"Stats", "StatsRequest", "StatsResponse", false},
}

// typeName renders a field's type the way v0.2.9's proto writes it.
func typeName(fd protoreflect.FieldDescriptor) string {
	if fd.IsMap() {
		return fmt.Sprintf("map<%s,%s>", typeName(fd.MapKey()), typeName(fd.MapValue()))
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return strings.TrimPrefix(string(fd.Message().FullName()), "types.")
	case protoreflect.EnumKind:
		return "enum " + string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}

// labelName renders a field's label the way v0.2.9's proto writes it.
func labelName(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "map"
	case fd.Cardinality() == protoreflect.Repeated:
		return "repeated"
	case fd.Cardinality() == protoreflect.Optional:
		return "singular"
	}
	return "required?"
}

func TestFileFacts(t *testing.T) {
	fd := File_api_types_api_proto
	if got := fd.Path(); got != "api/types/api.proto" {
		t.Errorf("registered path = %q, want api/types/api.proto", got)
	}
	if fd.Package() != "types" {
		t.Errorf("package = %q, want types", fd.Package())
	}
	if fd.Syntax() != protoreflect.Proto3 {
		t.Errorf("syntax = %v, want proto3", fd.Syntax())
	}
	imports := fd.Imports()
	if imports.Len() != 1 || imports.Get(0).Path() != "google/protobuf/timestamp.proto" {
		t.Errorf("imports: want only google/protobuf/timestamp.proto, got %d", imports.Len())
	}
	if fd.Enums().Len() != 0 || fd.Extensions().Len() != 0 {
		t.Errorf("want no enums nor extensions, got %d and %d", fd.Enums().Len(), fd.Extensions().Len())
	}
	if fd.Services().Len() != 1 {
		t.Errorf("want 1 service, got %d", fd.Services().Len())
	}
}

func TestMessages(t *testing.T) {
	msgs := File_api_types_api_proto.Messages()
	if msgs.Len() != len(v029Messages) || len(v029Messages) != 46 {
		t.Fatalf("file has %d messages, table %d, doc 46", msgs.Len(), len(v029Messages))
	}
	for i, want := range v029Messages {
		md := msgs.Get(i)
		if string(md.Name()) != want.name {
			t.Errorf("message %d is %s, want %s (file order)", i, md.Name(), want.name)
			continue
		}
		t.Run(want.name, func(t *testing.T) { checkMessage(t, md, want.fields) })
	}
}

func checkMessage(t *testing.T, md protoreflect.MessageDescriptor, doc []field) {
	ext := extensions[string(md.Name())]
	all := append(slices.Clone(doc), ext...)
	fields := md.Fields()
	if fields.Len() != len(all) {
		t.Errorf("%d fields, want %d", fields.Len(), len(all))
	}
	for _, want := range all {
		fd := fields.ByNumber(want.num)
		if fd == nil {
			t.Errorf("field %d (%s) missing", want.num, want.name)
			continue
		}
		got := field{fd.Number(), string(fd.Name()), typeName(fd), labelName(fd)}
		if got != want {
			t.Errorf("field %d = %+v, want %+v", want.num, got, want)
		}
		if fd.HasOptionalKeyword() || fd.ContainingOneof() != nil || fd.IsExtension() {
			t.Errorf("field %s: optional keyword, oneof or extension", fd.Name())
		}
		if fd.Cardinality() == protoreflect.Repeated && !fd.IsMap() && fd.Kind() != protoreflect.StringKind &&
			fd.Kind() != protoreflect.MessageKind && !fd.IsPacked() {
			t.Errorf("repeated scalar %s is not packed", fd.Name())
		}
	}
	reserved := md.ReservedRanges()
	var gotReserved []protowire.Number
	for i := 0; i < reserved.Len(); i++ {
		for n := reserved.Get(i)[0]; n < reserved.Get(i)[1]; n++ {
			gotReserved = append(gotReserved, n)
		}
	}
	if wantReserved := v029Reserved[string(md.Name())]; !slices.Equal(gotReserved, wantReserved) {
		t.Errorf("reserved = %v, want %v", gotReserved, wantReserved)
	}
	if md.ReservedNames().Len() != 0 || md.Oneofs().Len() != 0 || md.Enums().Len() != 0 {
		t.Error("unexpected reserved names, oneofs or enums")
	}
	// Extensions must not reuse a v0.2.9 or retired number.
	for _, e := range ext {
		if slices.ContainsFunc(doc, func(f field) bool { return f.num == e.num }) ||
			slices.Contains(v029Reserved[string(md.Name())], e.num) {
			t.Errorf("extension %s reuses number %d", e.name, e.num)
		}
	}
	// The only nested messages are the implicit map entries.
	for i := 0; i < md.Messages().Len(); i++ {
		nested := md.Messages().Get(i)
		if !nested.IsMapEntry() {
			t.Errorf("unexpected nested message %s", nested.FullName())
		}
	}
}

func TestMapEntries(t *testing.T) {
	for _, tc := range []struct{ entry, key, value string }{
		{"types.MemoryStats.StatsEntry", "string", "uint64"},
		{"types.CgroupStats.HugetlbStatsEntry", "string", "HugetlbStats"},
	} {
		md := File_api_types_api_proto.Messages().ByName("MemoryStats")
		if strings.HasPrefix(tc.entry, "types.CgroupStats") {
			md = File_api_types_api_proto.Messages().ByName("CgroupStats")
		}
		entry := md.Messages().ByName(protoreflect.Name(tc.entry[strings.LastIndex(tc.entry, ".")+1:]))
		if entry == nil || string(entry.FullName()) != tc.entry || !entry.IsMapEntry() {
			t.Errorf("map entry %s missing", tc.entry)
			continue
		}
		k, v := entry.Fields().ByNumber(1), entry.Fields().ByNumber(2)
		if k == nil || v == nil || k.Name() != "key" || v.Name() != "value" ||
			typeName(k) != tc.key || typeName(v) != tc.value {
			t.Errorf("%s: want key = 1 %s, value = 2 %s", tc.entry, tc.key, tc.value)
		}
	}
}

func TestService(t *testing.T) {
	sd := File_api_types_api_proto.Services().ByName("API")
	if sd == nil || sd.FullName() != "types.API" {
		t.Fatal("service types.API missing")
	}
	if sd.Methods().Len() != len(v029Methods) {
		t.Errorf("%d methods, want %d", sd.Methods().Len(), len(v029Methods))
	}
	streams := map[string]grpc.StreamDesc{}
	for _, s := range API_ServiceDesc.Streams {
		streams[s.StreamName] = s
	}
	unary := map[string]bool{}
	for _, m := range API_ServiceDesc.Methods {
		unary[m.MethodName] = true
	}
	if API_ServiceDesc.ServiceName != "types.API" {
		t.Errorf("ServiceDesc name = %q", API_ServiceDesc.ServiceName)
	}
	for i, want := range v029Methods {
		m := sd.Methods().Get(i)
		path := "/" + string(sd.FullName()) + "/" + string(m.Name())
		if path != "/types.API/"+want.name {
			t.Errorf("method %d: wire path %s, want /types.API/%s", i, path, want.name)
			continue
		}
		if got := string(m.Input().FullName()); got != "types."+want.in {
			t.Errorf("%s: input %s, want types.%s", want.name, got, want.in)
		}
		if got := string(m.Output().FullName()); got != "types."+want.out {
			t.Errorf("%s: output %s, want types.%s", want.name, got, want.out)
		}
		if m.IsStreamingClient() || m.IsStreamingServer() != want.serverStream {
			t.Errorf("%s: client stream %v, server stream %v", want.name, m.IsStreamingClient(), m.IsStreamingServer())
		}
		// The generated gRPC descriptor agrees.
		if s, ok := streams[want.name]; want.serverStream != ok || unary[want.name] == want.serverStream ||
			(ok && (!s.ServerStreams || s.ClientStreams)) {
			t.Errorf("%s: API_ServiceDesc disagrees on the method kind", want.name)
		}
	}
	if API_Events_FullMethodName != "/types.API/Events" || API_GetServerVersion_FullMethodName != "/types.API/GetServerVersion" {
		t.Error("generated method name constants are wrong")
	}
}

// Hand-encoded messages: these guard the wire itself, independently of the
// generator's tables.

func tag(b []byte, n protowire.Number, t protowire.Type) []byte { return protowire.AppendTag(b, n, t) }

func str(b []byte, n protowire.Number, s string) []byte {
	return protowire.AppendString(tag(b, n, protowire.BytesType), s)
}

func varint(b []byte, n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(tag(b, n, protowire.VarintType), v)
}

func sub(b []byte, n protowire.Number, m []byte) []byte {
	return protowire.AppendBytes(tag(b, n, protowire.BytesType), m)
}

func packed(b []byte, n protowire.Number, vs ...uint64) []byte {
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, v)
	}
	return sub(b, n, p)
}

func TestWireEvent(t *testing.T) {
	ts := varint(varint(nil, 1, 1496102400), 2, 123456789) // Timestamp{seconds, nanos}
	var b []byte
	b = str(b, 1, "exit")
	b = str(b, 2, "c1")
	b = varint(b, 3, 137)
	b = str(b, 4, "init")
	b = sub(b, 6, ts)
	b = varint(b, 7, 42) // extension: seq

	var ev Event
	if err := proto.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	want := &Event{Type: "exit", Id: "c1", Status: 137, Pid: "init",
		Timestamp: timestamppb.New(time.Unix(1496102400, 123456789)), Seq: 42}
	if !proto.Equal(&ev, want) {
		t.Errorf("decoded %v, want %v", &ev, want)
	}
	// And the generated code writes the same bytes (fields in number order).
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil || !bytes.Equal(out, b) {
		t.Errorf("marshal = %x, %v; want %x", out, err, b)
	}
	// A v0.2.9-style event without seq decodes with Seq == 0.
	var old Event
	if err := proto.Unmarshal(b[:len(b)-2], &old); err != nil || old.Seq != 0 || old.Status != 137 {
		t.Errorf("event without seq: %v, %v", &old, err)
	}
}

func TestWireEventsRequest(t *testing.T) {
	// An empty but present Timestamp differs from an absent one (docs/api.md 2.2).
	b := sub(nil, 2, nil)
	b = varint(b, 3, 1)
	b = str(b, 4, "c1")
	b = varint(b, 5, 9) // extension: afterSeq
	var r EventsRequest
	if err := proto.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Timestamp == nil || r.Timestamp.Seconds != 0 || !r.StoredOnly || r.Id != "c1" || r.AfterSeq != 9 {
		t.Errorf("decoded %v", &r)
	}
	var absent EventsRequest
	if err := proto.Unmarshal(varint(nil, 3, 1), &absent); err != nil || absent.Timestamp != nil {
		t.Errorf("absent timestamp decoded as %v, %v", absent.Timestamp, err)
	}
}

func TestWirePackedAndUnpacked(t *testing.T) {
	pids := []uint64{1, 300, 4294967295}
	want := &Container{Id: "c1", Pids: []uint32{1, 300, 4294967295}}

	b := packed(str(nil, 1, "c1"), 6, pids...)
	var c Container
	if err := proto.Unmarshal(b, &c); err != nil || !proto.Equal(&c, want) {
		t.Errorf("packed: %v, %v", &c, err)
	}
	if out, _ := proto.Marshal(want); !bytes.Equal(out, b) {
		t.Errorf("Container.pids not sent packed: %x, want %x", out, b)
	}

	// Every conforming parser also accepts the unpacked form.
	u := str(nil, 1, "c1")
	for _, p := range pids {
		u = varint(u, 6, p)
	}
	var cu Container
	if err := proto.Unmarshal(u, &cu); err != nil || !proto.Equal(&cu, want) {
		t.Errorf("unpacked: %v, %v", &cu, err)
	}

	// User.additionalGids and CpuUsage.percpu_usage are packed too.
	ub := packed(varint(nil, 1, 1000), 3, 10, 20)
	var user User
	if err := proto.Unmarshal(ub, &user); err != nil || user.Uid != 1000 || !slices.Equal(user.AdditionalGids, []uint32{10, 20}) {
		t.Errorf("User: %v, %v", &user, err)
	}
	if out, _ := proto.Marshal(&CpuUsage{PercpuUsage: []uint64{5, 6}}); !bytes.Equal(out, packed(nil, 2, 5, 6)) {
		t.Errorf("CpuUsage.percpu_usage not packed: %x", out)
	}
}

func TestWireSignedness(t *testing.T) {
	// int64 (not sint64): -1 is a 10-byte varint of two's complement.
	b := varint(nil, 1, uint64(1<<64-1))
	var d BlockIODevice
	if err := proto.Unmarshal(b, &d); err != nil || d.Major != -1 {
		t.Errorf("BlockIODevice.major = %d, %v; want -1", d.Major, err)
	}
	// uint32 status: the largest values survive.
	var ev Event
	if err := proto.Unmarshal(varint(nil, 3, 4294967295), &ev); err != nil || ev.Status != 4294967295 {
		t.Errorf("Event.status = %d, %v", ev.Status, err)
	}
}

func TestWireMaps(t *testing.T) {
	entry := str(nil, 1, "rss")
	entry = varint(entry, 2, 4096)
	b := sub(varint(nil, 1, 7), 5, entry)
	var m MemoryStats
	if err := proto.Unmarshal(b, &m); err != nil || m.Cache != 7 || m.Stats["rss"] != 4096 {
		t.Errorf("MemoryStats: %v, %v", &m, err)
	}
	h := sub(str(nil, 1, "2MB"), 2, varint(varint(nil, 1, 2097152), 3, 1))
	var cg CgroupStats
	if err := proto.Unmarshal(sub(nil, 4, h), &cg); err != nil ||
		cg.HugetlbStats["2MB"].GetUsage() != 2097152 || cg.HugetlbStats["2MB"].GetFailcnt() != 1 {
		t.Errorf("CgroupStats: %v, %v", &cg, err)
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	// A request from a newer client: known fields plus fields this build does
	// not know, of every wire type, including a reserved (retired) tag.
	b := str(nil, 1, "c1")
	b = varint(b, 1000, 5)
	b = str(b, 1001, "future")
	b = protowire.AppendFixed32(tag(b, 1002, protowire.Fixed32Type), 7)
	b = protowire.AppendFixed64(tag(b, 1003, protowire.Fixed64Type), 8)
	b = sub(b, 1004, str(nil, 1, "nested"))
	b = str(b, 4, "c2")
	var r EventsRequest
	if err := proto.Unmarshal(append(varint(nil, 1, 12345), b...), &r); err != nil {
		t.Fatalf("unknown fields rejected: %v", err)
	}
	if r.Id != "c2" || r.Timestamp != nil || r.AfterSeq != 0 {
		t.Errorf("decoded %v", &r)
	}
	// Same for a response an old client gets from this daemon: an extension
	// field is just an unknown field to it. Simulate with a message lacking it.
	var v GetServerVersionResponse
	if err := proto.Unmarshal(append(varint(nil, 99, 1), varint(nil, 2, 2)...), &v); err != nil || v.Minor != 2 {
		t.Errorf("GetServerVersionResponse: %v, %v", &v, err)
	}
	// With DiscardUnknown the re-encoded message carries only known fields.
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if out, _ := proto.Marshal(&r); !bytes.Equal(out, str(nil, 4, "c2")) {
		t.Errorf("after DiscardUnknown: %x", out)
	}
}

// TestJSONNames checks what `ctr state` prints with encoding/json: the proto
// field names exactly as written, with omitempty.
func TestJSONNames(t *testing.T) {
	for _, tc := range []struct {
		msg  any
		want string
	}{
		{&Container{Id: "c1", BundlePath: "/b", Status: "running", Pids: []uint32{7},
			Processes: []*Process{{Pid: "init", SystemPid: 7, User: &User{AdditionalGids: []uint32{1}}}}},
			`{"id":"c1","bundlePath":"/b","processes":[{"pid":"init","user":{"additionalGids":[1]},"systemPid":7}],"status":"running","pids":[7]}`},
		{&NetworkStats{RxBytes: 1, Rx_Packets: 2, RxErrors: 3, RxDropped: 4, TxBytes: 5, TxPackets: 6, TxErrors: 7, TxDropped: 8},
			`{"rx_bytes":1,"rx_Packets":2,"Rx_errors":3,"Rx_dropped":4,"Tx_bytes":5,"Tx_packets":6,"Tx_errors":7,"Tx_dropped":8}`},
		{&CpuStats{CpuUsage: &CpuUsage{TotalUsage: 1, PercpuUsage: []uint64{1}}, SystemUsage: 2},
			`{"cpu_usage":{"total_usage":1,"percpu_usage":[1]},"system_usage":2}`},
		{&AddProcessResponse{SystemPid: 9}, `{"systemPid":9}`},
		{&Checkpoint{Name: "cp", UnixSockets: true, EmptyNS: []string{"network"}}, `{"name":"cp","unixSockets":true,"emptyNS":["network"]}`},
		{&Event{Type: "exit", Seq: 3}, `{"type":"exit","seq":3}`},
		{&EventsRequest{AfterSeq: 3}, `{"afterSeq":3}`},
	} {
		out, err := json.Marshal(tc.msg)
		if err != nil || string(out) != tc.want {
			t.Errorf("json = %s, %v\nwant   %s", out, err, tc.want)
		}
	}
}
