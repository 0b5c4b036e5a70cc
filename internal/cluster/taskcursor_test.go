package cluster

import "testing"

// FuzzParseTaskCursor: a tasks/list cursor comes from the client. Any
// string parses or is ErrBadCursor, never a panic, and a cursor that
// parses is made again from its parts.
func FuzzParseTaskCursor(f *testing.F) {
	for _, s := range []string{"", ":", "1:a", "1764000000000:abc", "x:y", "-1:z", "99999999999999999999:a", "1:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, id, err := ParseTaskCursor(s)
		if err != nil {
			if err != ErrBadCursor {
				t.Fatalf("ParseTaskCursor(%q): error %v, want ErrBadCursor", s, err)
			}
			return
		}
		if ms2, id2, err := ParseTaskCursor(TaskCursor(ms, id)); err != nil || ms2 != ms || id2 != id {
			t.Fatalf("ParseTaskCursor(TaskCursor(%d, %q)) = %d, %q, %v", ms, id, ms2, id2, err)
		}
	})
}

func TestTaskAfter(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		id   string
		want bool
	}{{5, "b", false}, {5, "c", true}, {6, "a", true}, {4, "z", false}, {5, "a", false}} {
		if got := TaskAfter(c.ms, c.id, 5, "b"); got != c.want {
			t.Errorf("TaskAfter(%d, %q, 5, b) = %v, want %v", c.ms, c.id, got, c.want)
		}
	}
}
