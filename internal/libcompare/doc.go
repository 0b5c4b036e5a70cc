// Package libcompare measures our hand-written internal/jsonschema and
// internal/uritemplate side by side with the libraries the official Go
// SDK uses for the same work (github.com/google/jsonschema-go and
// github.com/yosida95/uritemplate/v3), on our own paths: schema inference
// and compilation at tool registration, argument validation per call,
// and template matching per resources/read. Its tests pin the reasons,
// given in those packages' docs, for keeping ours; it has no code of its
// own.
//
//	go test -run '^$' -bench . -count=6 ./internal/libcompare > bench.txt
//	benchstat -col /impl bench.txt
package libcompare
