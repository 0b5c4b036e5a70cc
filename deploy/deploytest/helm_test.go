package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// helmPath returns the helm binary: $HELM when set, otherwise the one
// scripts/helm.sh builds (once) into its cache and prints.
var helmPath = sync.OnceValues(func() (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "scripts", "helm.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/helm.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

func helm(t testing.TB) string {
	t.Helper()
	h, err := helmPath()
	if err != nil {
		t.Fatalf("no helm binary: %v", err)
	}
	return h
}

// helmCmd returns a helm command with args, offline: no repositories, no
// cluster, a private HOME for its config and cache.
func helmCmd(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		// No cluster: lookup returns nothing and nothing is contacted.
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	return cmd
}

// runHelm runs helm and returns its stdout; the error holds stderr too.
func runHelm(t testing.TB, args ...string) (stdout string, err error) {
	t.Helper()
	cmd := helmCmd(t, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr.String(), out.String())
	}
	return out.String(), nil
}

func chartDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "helm", "mcpcluster")
}

// writeValues writes a values file holding doc (YAML) and returns its path.
// The path has no comma: helm splits --values at commas (so t.TempDir, named
// after the test, will not do).
func writeValues(t testing.TB, doc string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "deploytest-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// renderChart runs helm template for release "mcp" in namespace "mcp" with
// the values in doc and returns the rendered documents.
func renderChart(t testing.TB, doc string) ([][]byte, error) {
	t.Helper()
	out, err := runHelm(t, "template", "mcp", chartDir(t), "--namespace", "mcp",
		"--values", writeValues(t, doc))
	if err != nil {
		return nil, err
	}
	return splitYAML(out)
}

// splitYAML splits a multi-document YAML stream, dropping empty documents.
func splitYAML(s string) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, fmt.Errorf("rendered document is not YAML: %v\n%s", err, doc)
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// runHelmCombined runs helm and returns its stdout and stderr together,
// whatever its exit status.
func runHelmCombined(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := helmCmd(t, args...).CombinedOutput()
	return string(out), err
}
