// Package archtest checks the rules of the house of docs/ARCHITECTURE.md
// against the code, in its tests: who may import whom (TestImports, a
// table of rules over the import graph that go list reports, printing
// the chain of imports that breaks one), the size of files
// (TestFileSize), and the measure of how far the HTTP adapter reaches
// into the node and the seams (TestAdapterReach, printed with -v).
package archtest
