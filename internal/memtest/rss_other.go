//go:build !unix

package memtest

import "os"

// maxRSS reports that this system gives no peak RSS of a child: the tests
// that bound memory skip.
func maxRSS(*os.ProcessState) (int64, bool) { return 0, false }
