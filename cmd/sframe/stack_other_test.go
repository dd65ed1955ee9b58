//go:build !(linux && amd64)

package main

import (
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// startStackProg skips: the live test program (stack_test.go) is built
// for linux/amd64 only, and the tests that share it must still compile
// (and vet) elsewhere.
func startStackProg(t *testing.T, env ...string) (*testprog.Proc, string) {
	t.Helper()
	t.Skip("the live test program is built for linux/amd64 only")
	return nil, ""
}
