package main

import (
	"io"
	"os"

	"github.com/sframekit/sframekit/elffile"
)

// stdin is what the operand "-" reads; tests replace it.
var stdin io.Reader = os.Stdin

// stdinName is how "-" is named in messages and output.
const stdinName = "<stdin>"

// displayName is the name of operand path in messages and output.
func displayName(path string) string {
	if path == "-" {
		return stdinName
	}
	return path
}

// openELF opens the ELF file path, or for "-" reads one from standard
// input into memory (at most elffile.MaxStreamSize bytes), since
// debug/elf needs to seek. Errors say what is wrong with input that is
// not a whole ELF file (elffile.OpenArg).
func openELF(path string) (*elffile.File, error) {
	if path != "-" {
		return elffile.OpenArg(path)
	}
	data, err := elffile.ReadStream(stdin)
	if err != nil {
		return nil, err
	}
	return elffile.NewFile(data)
}

// readInput reads the whole file path, or standard input for "-".
func readInput(path string) ([]byte, error) {
	if path == "-" {
		return elffile.ReadStream(stdin)
	}
	return os.ReadFile(path)
}
