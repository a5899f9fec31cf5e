package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evjournal/containerd/bundle"
)

// The bundle the daemon hands a runtime that cannot read the client's spec
// dialect (docs/api.md 7.3): <container dir>/.bundle holds the translated
// config.json, whose root.path is the client's rootfs, and the client's
// bundle path. It lives and goes with the container dir (Delete, Discard,
// a failed New), and is renamed with it by Retire: the runtime needs it
// only to create, restore and exec, all before the init's exit. The name
// is not a valid process id, so no exec can take it and Load does not take
// it for a process.
const (
	translatedDir    = ".bundle"
	translatedSource = "source" // the client's bundle path, for Recover
)

// translateFor returns the config.json the runtime of rec must be handed
// instead of the client's data, or nil when the runtime reads the bundle as
// it is. A translated rec takes the translation's dialect, so whatever the
// daemon writes for the runtime (an exec's process, `runc update`'s
// resources) is written as this runtime reads it.
func translateFor(rec *containerRecord, data []byte) ([]byte, error) {
	rt := RuntimeFeatures(rec.Runtime).Dialect()
	if !rec.Spec.Dialect.NeedsTranslation(rt) {
		return nil, nil
	}
	out, err := bundle.Translate(data, rec.Bundle)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(rec.Bundle, bundle.ConfigFile), err)
	}
	rec.Spec.Dialect, rec.Translated = rt, true
	return out, nil
}

// writeTranslated writes the translated bundle into the container dir.
func writeTranslated(dir, source string, config []byte) error {
	tdir := filepath.Join(dir, translatedDir)
	if err := os.Mkdir(tdir, 0o700); err != nil {
		return fmt.Errorf("translated bundle: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(tdir, translatedSource), []byte(source+"\n"), 0o600); err != nil {
		return fmt.Errorf("translated bundle: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(tdir, bundle.ConfigFile), config, 0o600); err != nil {
		return fmt.Errorf("translated bundle: %w", err)
	}
	return nil
}

// clientBundle is the client's bundle when runtimeBundle, as the runtime
// reports it, is the translated bundle of the container dir dir; ok is
// false for any other bundle, which is the client's own.
func clientBundle(dir, runtimeBundle string) (path string, ok bool) {
	if filepath.Clean(runtimeBundle) != filepath.Join(dir, translatedDir) {
		return "", false
	}
	data, err := bundle.ReadFile(filepath.Join(dir, translatedDir, translatedSource), 4<<10)
	if err != nil {
		return "", false
	}
	return strings.TrimSuffix(string(data), "\n"), true
}
