package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The frontmatter renders as written, in the author's order, by the YAML
// 1.2 core schema (what a host's YAML library reads).
func TestFrontmatterRendering(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"order kept", "name: a\ndescription: d\nlicense: MIT\n",
			`{"name":"a","description":"d","license":"MIT"}`},
		{"core schema scalars", "name: a\ndescription: d\nx: [yes, no, on, off, true, False, ~, null, '', 012, 0o17, 0x1F, 1_000, 1.5, -2e3, .5, 2024-01-02, +7]\n",
			`{"name":"a","description":"d","x":["yes","no","on","off",true,false,null,null,"",12,15,31,"1_000",1.5,-2000,0.5,"2024-01-02",7]}`},
		{"quoted and block scalars are strings", "name: a\ndescription: >-\n  folded\n  text\nq: \"12\"\nl: |\n  line\n",
			`{"name":"a","description":"folded text","q":"12","l":"line\n"}`},
		{"explicit tags", "name: a\ndescription: d\ns: !!str 12\ni: !!int \"7\"\nc: !custom v\n",
			`{"name":"a","description":"d","s":"12","i":7,"c":"v"}`},
		{"nested and aliases", "name: a\ndescription: d\nbase: &b {k: 1}\nmetadata:\n  copy: *b\n  <<: *b\n",
			`{"name":"a","description":"d","base":{"k":1},"metadata":{"copy":{"k":1},"<<":{"k":1}}}`},
		{"non-string keys read as their text", "name: a\ndescription: d\n1: one\ntrue: t\n",
			`{"name":"a","description":"d","1":"one","true":"t"}`},
		{"HTML stays unescaped", "name: a\ndescription: <b> & </b>\n",
			`{"name":"a","description":"<b> & </b>"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fm, err := parseFrontmatter([]byte("---\n" + tc.yaml + "---\nbody\n"))
			if err != nil {
				t.Fatal(err)
			}
			if string(fm.json) != tc.want {
				t.Errorf("got  %s\nwant %s", fm.json, tc.want)
			}
		})
	}
}

// Delimiters: a byte order mark and CRLF line ends are fine, trailing
// blanks after the closing line too; the body may hold more "---".
func TestFrontmatterDelimiters(t *testing.T) {
	for _, md := range []string{
		"\ufeff---\nname: a\ndescription: d\n---\n",
		"---\r\nname: a\r\ndescription: d\r\n---  \r\nbody\r\n",
		"---\nname: a\ndescription: d\n---",
		"---\nname: a\ndescription: d\n---\n---\nmore: yaml\n---\n",
	} {
		fm, err := parseFrontmatter([]byte(md))
		if err != nil || fm.name != "a" || fm.description != "d" {
			t.Errorf("%q: %+v, %v", md, fm, err)
		}
	}
}

// What JSON cannot hold, what is too big and what nests too deep are
// errors, never panics.
func TestFrontmatterRefuses(t *testing.T) {
	bomb := "name: a\ndescription: d\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 6; i++ {
		cur := string(rune('b' + i))
		bomb += cur + ": &" + cur + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = cur
	}
	cases := []struct {
		name, md, want string
	}{
		{"infinity", "---\nname: a\ndescription: d\nx: .inf\n---\n", "not a number JSON can hold"},
		{"huge float", "---\nname: a\ndescription: d\nx: 1e999\n---\n", "out of JSON's range"},
		{"null key", "---\nname: a\ndescription: d\n~: x\n---\n", "a null key"},
		{"mapping key", "---\nname: a\ndescription: d\n? {a: 1}\n: x\n---\n", "not a scalar"},
		{"two documents", "---\nname: a\ndescription: d\n...\nname: b\n---\n", "more than one YAML document"},
		{"alias bomb", "---\n" + bomb + "---\n", "more than 10000 values"},
		{"too deep", "---\nname: a\ndescription: d\nx: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n---\n", "nests deeper than 64"},
		{"too long", "---\nname: a\ndescription: d\nx: " + strings.Repeat("y", maxFrontmatterBytes) + "\n---\n", "over the bound"},
		{"empty", "---\n---\n", "empty frontmatter"},
		{"comment only", "---\n# nothing\n---\n", "is empty"},
		{"bad tag", "---\nname: a\ndescription: d\nx: !!bool maybe\n---\n", "not a boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFrontmatter([]byte(tc.md))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// FuzzSkillFrontmatter: whatever a SKILL.md holds, parsing it returns an
// error or a frontmatter that is a JSON object holding the name and
// description it reports, within the bounds; it never panics.
func FuzzSkillFrontmatter(f *testing.F) {
	for _, seed := range []string{
		"---\nname: a\ndescription: d\n---\n",
		"---\nname: pdf-processing\ndescription: >-\n  Extract PDFs.\nmetadata:\n  version: \"2.1\"\n---\nbody",
		"---\nname: a\ndescription: d\nx: &x [*x]\n---\n",
		"---\nname: a\ndescription: d\n<<: {k: 1}\nt: !!timestamp 2024-01-01\n---\n",
		"---\n[a, {b: c}]\n---\n",
		"---\r\nname: a\r\n---\r\n",
		"\ufeff---\nname: \"\\u0000\"\ndescription: \"\\ud800\"\n---\n",
		"---\nname: a\ndescription: d\n? [x]\n: y\n---\n",
		"---\n%YAML 1.2\n---\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, md []byte) {
		fm, err := parseFrontmatter(md)
		if err != nil {
			return
		}
		if len(fm.json) > maxFrontmatterJSON+maxFrontmatterBytes {
			t.Fatalf("rendered %d bytes", len(fm.json))
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(fm.json, &obj); err != nil {
			t.Fatalf("rendering %q is not a JSON object: %v", fm.json, err)
		}
		var name, desc string
		if json.Unmarshal(obj["name"], &name) != nil || name != fm.name || json.Unmarshal(obj["description"], &desc) != nil || desc != fm.description {
			t.Fatalf("name %q / description %q disagree with %s", fm.name, fm.description, fm.json)
		}
		if !skillNameRE.MatchString(name) || strings.TrimSpace(desc) == "" {
			t.Fatalf("accepted name %q, description %q", name, desc)
		}
		if !json.Valid(fm.json) || bytes.ContainsRune(fm.json, '\n') {
			t.Fatalf("rendering is not compact JSON: %q", fm.json)
		}
	})
}
