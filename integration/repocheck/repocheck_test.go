// Package repocheck tests the repository itself: what a reader of it (or a
// new user at its Makefile) meets, beyond any one package.
package repocheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// outsideRefs are references a reader of the repository cannot follow:
// the tracker and work log it was built from, and paths outside it. Docs
// and comments say what such a reference meant instead.
var outsideRefs = []struct {
	re   *regexp.Regexp
	hint string // in every match, lower-cased: files without it are not scanned
	what string
}{
	{regexp.MustCompile(`(?i)\bissues? #?[0-9]+`), "issue", "a numbered issue"},
	{regexp.MustCompile(`(?i)\b(at|since|until|before|after|from|in) stop [0-9]+\b`), "stop ", "a numbered stop of a work log"},
	{regexp.MustCompile(`(?i)\bthe (project's )?[c]ard\b`), "card", "the planning card of the project"},
	{regexp.MustCompile(`shared[/]docs/|\.\./shared/`), "shared/", "a path outside the repository"},
	{regexp.MustCompile(`(?m)(^|[\s"'(=])/work/`), "work/", "a path outside the repository"},
}

// TestDocsStandOnTheRepo: no doc, script or Go comment refers to what only
// the project's authors could find (make lint runs it as docs-check).
func TestDocsStandOnTheRepo(t *testing.T) {
	root := repoRoot(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if checked(d.Name()) {
			found = append(found, outsideRefsIn(t, root, path)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("%d references a reader of the repository cannot follow (say what they meant instead):\n%s",
			len(found), strings.Join(found, "\n"))
	}
}

func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "bin" || name == "vendor" || name == "testdata"
}

// checked: the files people read, docs and code (whose comments cite).
func checked(name string) bool {
	for _, ext := range []string{".md", ".go", ".sh", ".proto", ".service"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return strings.HasPrefix(name, "Makefile")
}

// outsideRefsIn lists path's lines that match outsideRefs, as
// "file:line: what: text". Each pattern scans the whole file once.
func outsideRefsIn(t *testing.T, root, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(root, path)
	lower := bytes.ToLower(b)
	var out []string
	for _, r := range outsideRefs {
		if !bytes.Contains(lower, []byte(r.hint)) {
			continue
		}
		for _, m := range r.re.FindAllIndex(b, -1) {
			start := bytes.LastIndexByte(b[:m[0]], '\n') + 1
			end := len(b)
			if n := bytes.IndexByte(b[m[0]:], '\n'); n >= 0 {
				end = m[0] + n
			}
			line := bytes.Count(b[:m[0]], []byte("\n")) + 1
			out = append(out, fmt.Sprintf("%s:%d: %s: %s", rel, line, r.what, bytes.TrimSpace(b[start:end])))
		}
	}
	return out
}

// TestMakeBuildsBinariesByRelativeName: `make bin/runc` (every binary of
// `make build`, by the name one types from the repo) builds that file, as
// the target by its absolute path does. Dry runs (-n) with every target
// taken as out of date (-B): nothing is built.
func TestMakeBuildsBinariesByRelativeName(t *testing.T) {
	root := repoRoot(t)
	names := []string{"containerd", "containerd-shim", "ctr", "runc", "runc-rc2", "testinit", "mkbundle", "pause"}
	var relative, absolute []string
	for _, name := range names {
		relative = append(relative, "bin/"+name)
		absolute = append(absolute, filepath.Join(root, "bin", name))
	}
	for _, targets := range [][]string{relative, absolute} {
		out, err := makeDryRun(root, targets...)
		if err != nil {
			t.Errorf("make -n -B %s: %v\n%s", strings.Join(targets, " "), err, out)
			continue
		}
		for _, abs := range absolute {
			if !strings.Contains(out, "-o "+abs+" ") {
				t.Errorf("make -n -B %s builds no %s:\n%s", strings.Join(targets, " "), abs, out)
			}
		}
	}
}

// makeDryRun runs `make -n -B targets...` in root, with none of a calling
// make's flags (make test runs this test).
func makeDryRun(root string, targets ...string) (string, error) {
	cmd := exec.Command("make", append([]string{"-n", "-B"}, targets...)...)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
