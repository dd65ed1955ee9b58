package cfi

import "github.com/sframekit/sframekit/arch"

// machAugmentation reports augmentation letters that only exist on some
// machines (AArch64 'B' for the B key, 'G' for MTE-tagged frames).
func machAugmentation(a arch.Arch, c byte) bool {
	return a == arch.ARM64 && (c == 'B' || c == 'G')
}
