package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/specs"
)

// NeedsTranslation reports whether a runtime that speaks dialect rt cannot
// read a bundle of dialect d as it is: a bundle of the capability-list era
// (spec 1.0.0-rc1 to rc4: Docker 1.12 and 1.13) given to a runtime of a
// later spec, which fails on the list ("cannot unmarshal array into Go
// struct field Process.process.capabilities"). A bundle of today's spec
// given to a list-era runtime is handed over as it is: the runtime predates
// what such a bundle may ask for, and its own error says what it cannot read.
func (d Dialect) NeedsTranslation(rt Dialect) bool { return d.CapabilityList && !rt.CapabilityList }

// Translate rewrites data, a config.json of the capability-list era, as a
// runtime of today's spec (specs.Version) reads it, with the same meaning
// (docs/api.md 7.3 lists every change). dir is the client's bundle,
// absolute: the runtime runs in another dir, so the paths a runtime
// resolves against its bundle (root.path, a bind mount's source, a hook's
// path, a namespace's path) are made absolute against dir. A member that
// cannot be translated, or that today's runtime could still not read, is
// ErrInvalidArgument naming it. data itself is never modified.
func Translate(data []byte, dir string) ([]byte, error) {
	doc, err := decodeTree(data)
	if err != nil {
		return nil, err
	}
	for _, step := range []func(object, string) error{
		translateHeader, translateRoot, translateProcess, translateResources,
		translateSeccomp, translateMounts, translateHooks, translateNamespaces,
	} {
		if err := step(doc, dir); err != nil {
			return nil, err
		}
	}
	out, err := json.MarshalIndent(doc, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("encode the translated spec: %w", err)
	}
	return out, readableToday(out)
}

// object is a JSON object of the document being translated. Numbers are
// json.Number, so that values beyond float64's precision (Docker 1.13's
// swappiness is 2^64-1) are copied exactly.
type object = map[string]any

func decodeTree(data []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc object
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, fmt.Errorf("invalid JSON: want an object (%v): %w", err, errdefs.ErrInvalidArgument)
	}
	return doc, nil
}

// readableToday decodes the translation as a runtime of today's spec does
// (runc decodes config.json into the spec's Go types), so that what it
// would still refuse (a memory limit beyond int64, say) is refused here,
// naming the member, before anything is written or started.
func readableToday(data []byte) error {
	var spec specs.Spec
	if err := unmarshal(data, &spec, ""); err != nil {
		return fmt.Errorf("cannot be given to a runtime of spec %s: %w", specs.Version, err)
	}
	return nil
}

// translateHeader: the document is now of today's version; "platform" was
// removed from the spec in 1.0.0 (the runtime knows where it runs).
func translateHeader(doc object, _ string) error {
	doc["ociVersion"] = specs.Version
	delete(doc, "platform")
	return nil
}

// translateRoot makes root.path absolute: the translated bundle holds no
// rootfs, the client's is used where it is.
func translateRoot(doc object, dir string) error {
	root, err := member(doc, "root", "root")
	if err != nil {
		return err
	}
	rootfs, _ := root["path"].(string)
	if rootfs == "" {
		return invalid("root.path", "missing: the translated bundle must name the client's rootfs")
	}
	root["path"] = absIn(dir, rootfs)
	return nil
}

// translateProcess turns a list of capabilities into the object of sets,
// the list in each of the bounding, effective, inheritable and permitted
// sets, which is what the runtimes of the list era did with it.
func translateProcess(doc object, _ string) error {
	proc, err := member(doc, "process", "process")
	if err != nil {
		return err
	}
	if names, ok := proc["capabilities"].([]any); ok {
		proc["capabilities"] = object{"bounding": names, "effective": names, "inheritable": names, "permitted": names}
	}
	return nil
}

// translateResources moves the members of linux.resources that moved, and
// renames the block IO ones.
func translateResources(doc object, _ string) error {
	res, err := nested(doc, "linux", "resources")
	if res == nil || err != nil {
		return err
	}
	if err := moveOOMScoreAdj(doc, res); err != nil {
		return err
	}
	if err := moveDisableOOMKiller(res); err != nil {
		return err
	}
	if err := dropZeroPids(res); err != nil {
		return err
	}
	return renameBlockIO(res)
}

// moveOOMScoreAdj: linux.resources.oomScoreAdj became process.oomScoreAdj
// (1.0.0-rc6); a runtime of today ignores the old place.
func moveOOMScoreAdj(doc, res object) error {
	v, ok := res["oomScoreAdj"]
	if !ok {
		return nil
	}
	delete(res, "oomScoreAdj")
	proc, err := member(doc, "process", "process")
	if err != nil || v == nil {
		return err
	}
	if _, set := proc["oomScoreAdj"]; !set {
		proc["oomScoreAdj"] = v
	}
	return nil
}

// moveDisableOOMKiller: linux.resources.disableOOMKiller became
// linux.resources.memory.disableOOMKiller; today's runc reads only the
// latter, so an OOM killer the client disabled would be left on.
func moveDisableOOMKiller(res object) error {
	v, ok := res["disableOOMKiller"]
	if !ok {
		return nil
	}
	delete(res, "disableOOMKiller")
	if v == nil {
		return nil
	}
	mem, err := member(res, "memory", "linux.resources.memory")
	if err != nil {
		return err
	}
	if mem == nil {
		mem = object{}
		res["memory"] = mem
	}
	mem["disableOOMKiller"] = v
	return nil
}

// dropZeroPids: a pids limit of 0 meant "not set" to the runtimes of the
// list era (Docker 1.13 writes it for every container); today's runc makes
// it a limit of one task, which would leave the container unable to fork.
func dropZeroPids(res object) error {
	pids, err := member(res, "pids", "linux.resources.pids")
	if pids == nil || err != nil {
		return err
	}
	if n, ok := pids["limit"].(json.Number); ok && n.String() == "0" {
		delete(pids, "limit")
	}
	return nil
}

// renameBlockIO gives the block IO members today's names ("blkioWeight"
// is "weight"...): today's runtime ignores the old ones, changing nothing.
func renameBlockIO(res object) error {
	bio, err := member(res, "blockIO", "linux.resources.blockIO")
	if bio == nil || err != nil {
		return err
	}
	for today, old := range rc2BlockIO {
		if v, ok := bio[old]; ok {
			delete(bio, old)
			if _, set := bio[today]; !set {
				bio[today] = v
			}
		}
	}
	return nil
}

// translateSeccomp: a rule of the list era names one syscall ("name"), a
// rule of today a list ("names").
func translateSeccomp(doc object, _ string) error {
	sc, err := nested(doc, "linux", "seccomp")
	if sc == nil || err != nil {
		return err
	}
	rules, err := objects(sc, "syscalls", "linux.seccomp.syscalls")
	if err != nil {
		return err
	}
	for i, rule := range rules {
		if err := renameSyscall(rule, fmt.Sprintf("linux.seccomp.syscalls[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func renameSyscall(rule object, at string) error {
	v, ok := rule["name"]
	if !ok {
		if _, names := rule["names"]; names {
			return nil // already today's shape
		}
		return invalid(at+".name", "missing: a rule must name its syscall")
	}
	name, ok := v.(string)
	if !ok || name == "" {
		return invalid(at+".name", "want a syscall name")
	}
	delete(rule, "name")
	rule["names"] = []any{name}
	return nil
}

// translateMounts makes a bind mount's relative source absolute, as both
// eras' runtimes resolved it (by type "bind" then, by option since).
func translateMounts(doc object, dir string) error {
	mounts, err := objects(doc, "mounts", "mounts")
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if src, ok := m["source"].(string); ok && isBind(m) {
			m["source"] = absIn(dir, src)
		}
	}
	return nil
}

func isBind(m object) bool {
	if m["type"] == "bind" {
		return true
	}
	opts, _ := m["options"].([]any)
	return slices.Contains(opts, any("bind")) || slices.Contains(opts, any("rbind"))
}

// translateHooks: the runtime runs a hook whose path is relative from its
// own working dir, the bundle.
func translateHooks(doc object, dir string) error {
	hooks, err := member(doc, "hooks", "hooks")
	if hooks == nil || err != nil {
		return err
	}
	for kind := range hooks {
		list, err := objects(hooks, kind, "hooks."+kind)
		if err != nil {
			return err
		}
		for _, h := range list {
			if p, ok := h["path"].(string); ok {
				h["path"] = absIn(dir, p)
			}
		}
	}
	return nil
}

// translateNamespaces: a namespace to join is opened by path, relative to
// the runtime's working dir.
func translateNamespaces(doc object, dir string) error {
	linux, err := member(doc, "linux", "linux")
	if linux == nil || err != nil {
		return err
	}
	nss, err := objects(linux, "namespaces", "linux.namespaces")
	if err != nil {
		return err
	}
	for _, ns := range nss {
		if p, ok := ns["path"].(string); ok {
			ns["path"] = absIn(dir, p)
		}
	}
	return nil
}

// absIn resolves p against dir; "" and absolute paths are kept.
func absIn(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// member is the object o[name]: nil when absent or null, an error naming
// at when it is something else.
func member(o object, name, at string) (object, error) {
	v, ok := o[name]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(object)
	if !ok {
		return nil, invalid(at, "want an object")
	}
	return m, nil
}

// nested follows members from doc: nil as soon as one is absent.
func nested(doc object, names ...string) (object, error) {
	at, o := "", doc
	for _, n := range names {
		at = joinAt(at, n)
		next, err := member(o, n, at)
		if next == nil || err != nil {
			return nil, err
		}
		o = next
	}
	return o, nil
}

func joinAt(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// objects is the list of objects o[name] (nil when absent or null).
func objects(o object, name, at string) ([]object, error) {
	v, ok := o[name]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, invalid(at, "want a list")
	}
	out := make([]object, 0, len(list))
	for i, e := range list {
		m, ok := e.(object)
		if !ok {
			return nil, invalid(fmt.Sprintf("%s[%d]", at, i), "want an object")
		}
		out = append(out, m)
	}
	return out, nil
}

func invalid(at, what string) error {
	return fmt.Errorf("%s: %s: %w", at, what, errdefs.ErrInvalidArgument)
}
