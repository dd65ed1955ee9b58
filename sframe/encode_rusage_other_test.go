//go:build !unix

package sframe_test

import "time"

// encCPUTime is not available here; benchmarks report 0.
func encCPUTime() time.Duration { return 0 }
