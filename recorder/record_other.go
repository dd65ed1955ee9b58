//go:build !linux

package recorder

import (
	"context"
	"errors"
	"time"
)

// Record fails: perf events exist only on Linux.
func Record(ctx context.Context, opts Options) (*Profile, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return nil, errors.New("perf events need Linux")
}

// cpuTime returns 0.
func cpuTime() time.Duration { return 0 }
