package dump

import (
	"debug/elf"
	"fmt"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
)

// Input is an SFrame section loaded from a file, ready to print.
type Input struct {
	Path    string
	Format  string // BFD target name, or "raw" for a bare section
	Section string // section name
	SFrame  *sframe.Section
}

// LoadELF reads the SFrame section of the ELF file at path. secName
// selects a section by name; empty means ".sframe" or the first section of
// type SHT_GNU_SFRAME. In relocatable objects the section's relocations
// are applied, except for version 1 sections, which objdump 2.40 (the
// reference for v1) printed unrelocated.
func LoadELF(path, secName string) (*Input, error) {
	f, err := elffile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return FromELF(f.File, path, secName)
}

// FromELF is LoadELF for an ELF file already open; path is the name to
// print.
func FromELF(f *elf.File, path, secName string) (*Input, error) {
	sec := elffile.FindSFrame(f, secName)
	if sec == nil {
		if secName == "" {
			secName = ".sframe"
		}
		return nil, fmt.Errorf("no %s section", secName)
	}
	raw, err := elffile.SectionData(f, sec, elffile.Unrelocated)
	if err != nil {
		return nil, err
	}
	data := raw
	if len(raw) < 3 || raw[2] != byte(sframe.Version1) {
		if data, err = elffile.SectionData(f, sec, elffile.Relocated); err != nil {
			return nil, err
		}
	}
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	return &Input{Path: path, Format: elffile.BFDName(f), Section: sec.Name, SFrame: s}, nil
}

// FromRaw makes an Input of a bare SFrame section, data, loaded at
// address base; path is the name to print, secName the section's
// (".sframe" if empty).
func FromRaw(data []byte, path string, base uint64, secName string) (*Input, error) {
	s, err := sframe.Parse(data, base)
	if err != nil {
		return nil, err
	}
	if secName == "" {
		secName = ".sframe"
	}
	return &Input{Path: path, Format: "raw", Section: secName, SFrame: s}, nil
}
