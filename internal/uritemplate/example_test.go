package uritemplate_test

import (
	"fmt"

	"github.com/mcpcluster/mcpcluster/internal/uritemplate"
)

func ExampleTemplate_Expand() {
	t := uritemplate.MustParse("test://template/{id}/data{?fields}")
	uri, err := t.Expand(map[string]any{"id": "a b", "fields": []string{"name", "size"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(uri)
	// Output: test://template/a%20b/data?fields=name,size
}

func ExampleTemplate_Match() {
	t := uritemplate.MustParse("file:///{+path}")
	vars, ok := t.Match("file:///home/me/My%20Notes.txt")
	fmt.Println(ok, vars["path"])
	_, ok = uritemplate.MustParse("test://template/{id}/data").Match("test://template/a/b/data")
	fmt.Println(ok)
	// Output:
	// true home/me/My Notes.txt
	// false
}
