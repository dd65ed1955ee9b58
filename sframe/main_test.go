package sframe

import (
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestMain says at the end of the run how many tests skipped for want of
// the reference corpus.
func TestMain(m *testing.M) { corpus.Main(m) }
