package mcp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// Reading skills from a file system (a folder on disk through os.DirFS, a
// Kubernetes ConfigMap mounted as one, an embed.FS). Names starting with
// "." are left out (.git, editor files, and the ..data links of a
// mounted ConfigMap); symbolic links are followed, which is how a mounted
// ConfigMap presents its files, up to maxSkillDepth folders deep.
const maxSkillDepth = 32

// maxSkillFolders bounds the folders one search for skills walks.
const maxSkillFolders = 100000

// walkSkillFS calls file for every file below dir and folder for every
// folder (dir excluded), in lexical order.
func walkSkillFS(fsys fs.FS, dir string, depth int, folder, file func(p string) error) error {
	if depth > maxSkillDepth {
		return fmt.Errorf("%s: folders nest deeper than %d levels (a symbolic link loop?)", dir, maxSkillDepth)
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return err
	}
	for _, de := range entries {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := path.Join(dir, name)
		mode := de.Type()
		if mode&fs.ModeSymlink != 0 {
			fi, err := fs.Stat(fsys, p)
			if err != nil {
				return err
			}
			mode = fi.Mode().Type()
		}
		switch {
		case mode.IsDir():
			if err := folder(p); err != nil {
				return err
			}
			if err := walkSkillFS(fsys, p, depth+1, folder, file); err != nil {
				return err
			}
		case mode.IsRegular():
			if err := file(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// readSkillFS reads the files of the skill whose folder is the root of
// fsys, refusing a file over maxFile bytes and a skill past the
// extension's bounds before reading further.
func readSkillFS(fsys fs.FS, maxFile int) (map[string][]byte, error) {
	files := map[string][]byte{}
	total := 0
	err := walkSkillFS(fsys, ".", 0, func(string) error { return nil }, func(p string) error {
		if len(files) == SkillMaxFiles {
			return fmt.Errorf("has more than %d files, the extension's bound", SkillMaxFiles)
		}
		data, err := readBounded(fsys, p, maxFile)
		if err != nil {
			return err
		}
		if total += len(data); total > SkillMaxBytes {
			return fmt.Errorf("has more than %d bytes in its files, the extension's bound", SkillMaxBytes)
		}
		files[p] = data
		return nil
	})
	return files, err
}

// readBounded reads one file of at most limit bytes.
func readBounded(fsys fs.FS, p string, limit int) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooBig := fmt.Errorf("%s is larger than the bound of %d bytes on a skill file (ServerOptions.MaxSkillFileBytes, --max-skill-file-bytes)", p, limit)
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(limit) {
		return nil, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, tooBig
	}
	return data, nil
}

// findSkillRoots returns the folders of fsys holding a SKILL.md, sorted.
func findSkillRoots(fsys fs.FS) ([]string, error) {
	var roots []string
	folders := 0
	isSkill := func(dir string) bool {
		fi, err := fs.Stat(fsys, path.Join(dir, "SKILL.md"))
		return err == nil && fi.Mode().IsRegular()
	}
	if isSkill(".") {
		return nil, errors.New("SKILL.md lies at the top of the skills folder: each skill is a folder of its own, named after the skill")
	}
	err := walkSkillFS(fsys, ".", 0, func(dir string) error {
		if folders++; folders > maxSkillFolders {
			return fmt.Errorf("has more than %d folders", maxSkillFolders)
		}
		if isSkill(dir) {
			roots = append(roots, dir)
		}
		return nil
	}, func(string) error { return nil })
	return roots, err
}
