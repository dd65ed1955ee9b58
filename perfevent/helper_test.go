package perfevent

import "os"

const helperEnv = "PERFEVENT_TEST_HELPER"

func runHelper() { os.Exit(0) }
