//go:build !linux

package perfevent

import (
	"errors"
	"time"
)

// Session is a set of sampling events; perf events exist only on Linux.
type Session struct{}

// Stats are counts since Open.
type Stats struct {
	Records, Samples, Bytes, Wrapped, Lost, LostRecords, Corrupt uint64
}

// Open fails: perf events exist only on Linux.
func Open(opts Options) (*Session, error) {
	return nil, errors.New("perfevent: perf events need Linux")
}

// Attrs returns nil.
func (s *Session) Attrs() []*Attr { return nil }

// Enable fails.
func (s *Session) Enable() error { return errors.New("perfevent: perf events need Linux") }

// Disable fails.
func (s *Session) Disable() error { return errors.New("perfevent: perf events need Linux") }

// Run fails.
func (s *Session) Run(fn func(*Record) error) error {
	return errors.New("perfevent: perf events need Linux")
}

// SetPollInterval does nothing.
func (s *Session) SetPollInterval(d time.Duration) {}

// Stop does nothing.
func (s *Session) Stop() {}

// Exited reports false.
func (s *Session) Exited() bool { return false }

// Stats returns zeros.
func (s *Session) Stats() Stats { return Stats{} }

// RingPages returns 0.
func (s *Session) RingPages() int { return 0 }

// Warnings returns nil.
func (s *Session) Warnings() []string { return nil }

// UserOnly returns "".
func (s *Session) UserOnly() string { return "" }

// Close does nothing.
func (s *Session) Close() error { return nil }
