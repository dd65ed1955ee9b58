//go:build tools

// Package pyroscope pins the Grafana Pyroscope server that the agent's
// integration tests start: a module of its own, so that the server's
// dependencies stay out of sframekit's go.mod. .ci/run builds it with
//
//	go build -o BIN github.com/grafana/pyroscope/cmd/pyroscope
//
// from this directory.
package pyroscope

import _ "github.com/grafana/pyroscope/cmd/pyroscope"
