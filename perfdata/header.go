package perfdata

import (
	"bytes"
	"encoding/binary"

	"github.com/sframekit/sframekit/arch"
)

// Magic numbers: "PERFILE2" read as a little-endian word, and the same
// bytes written by a big-endian machine.
const (
	magicLE = 0x32454c4946524550
	magicBE = 0x50455246494c4532
)

// Header sizes: a file-mode header (with and without the feature bitmap
// of later perf versions) and a pipe-mode header.
const (
	fileHeaderSize    = 104
	oldFileHeaderSize = 72
	pipeHeaderSize    = 16
	fileSectionSize   = 16 // struct perf_file_section: offset, size
)

// Header is what a recording says about itself: the file header, the
// events and the feature sections. In pipe mode it fills in as the
// records that carry it (HEADER_ATTR, HEADER_FEATURE, HEADER_BUILD_ID,
// EVENT_UPDATE) are read.
type Header struct {
	// Pipe is set for the pipe format (perf record -o -).
	Pipe bool
	// ByteOrder is the byte order of the machine that wrote the file.
	ByteOrder binary.ByteOrder
	// DataOffset and DataSize locate the data section (file mode).
	DataOffset, DataSize int64
	// Truncated is set when the file ends inside its data section, or
	// the header's data size is 0 (perf record did not finish): the
	// records up to the end of the file are read, then Next reports an
	// error of kind ErrTruncated, which says what was lost; the feature
	// sections are missing.
	Truncated bool
	// statedDataSize is the data size the header states: more than
	// DataSize when the file was cut, 0 when perf record did not finish.
	statedDataSize int64
	// FeatureErr is the error of a feature section that could not be
	// read (past the end of the file, or malformed): the features before
	// it are set, the records are read, and Next returns FeatureErr in
	// place of io.EOF at the end.
	FeatureErr error
	// Features is the feature bitmap (file mode), or the features seen so
	// far (pipe mode).
	Features FeatureSet
	// Attrs are the events, in the file's order.
	Attrs []*Attr

	BuildIDs     []BuildID // BUILD_ID feature and HEADER_BUILD_ID records
	Hostname     string    // HOSTNAME (uname -n)
	OSRelease    string    // OSRELEASE (uname -r)
	Version      string    // VERSION of perf
	Arch         string    // ARCH (uname -m)
	CPUDesc      string    // CPUDESC
	CPUID        string    // CPUID
	NrCPUsOnline uint32    // NRCPUS
	NrCPUsAvail  uint32    // NRCPUS
	TotalMemKB   uint64    // TOTAL_MEM, in kB
	Cmdline      []string  // CMDLINE: perf's path, then its arguments
	// SampleTimeFirst and SampleTimeLast are the SAMPLE_TIME feature, in
	// the clock of the samples' TIME field.
	SampleTimeFirst, SampleTimeLast uint64
	// PMUMappings are the PMU_MAPPINGS feature: PMU type number to name.
	PMUMappings []PMUMapping
	// Compression is the COMPRESSED feature (perf record -z).
	Compression Compression
	// DirVersion is the DIR_FORMAT feature: 1 for a perf.data directory
	// (perf record --threads), whose data.N files hold the records.
	DirVersion uint64

	featData [NumFeatureBits][]byte // raw sections, for FeatureData
}

// BuildID is one entry of the build-ID table.
type BuildID struct {
	Misc     Misc // CPU mode: MiscKernel, MiscUser, MiscGuest*
	Pid      int32
	ID       []byte // the build ID (usually 20 bytes)
	Filename string
}

// PMUMapping names a PMU type number.
type PMUMapping struct {
	Type uint32
	Name string
}

// Compression describes perf record -z data.
type Compression struct {
	Version, Type, Level, Ratio uint32
	// MmapLen is the size of perf's ring buffers, which bounds what one
	// COMPRESSED record decompresses to.
	MmapLen uint32
}

// FeatureData returns the raw bytes of feature f's section (a copy in
// pipe mode, a view of the file otherwise), or nil.
func (h *Header) FeatureData(f Feature) []byte {
	if f < 0 || f >= NumFeatureBits {
		return nil
	}
	return h.featData[f]
}

// Machine maps Arch, perf's machine name, to an arch.Arch: arch.AMD64
// for "x86_64", arch.ARM64 for "aarch64" (or "arm64"), arch.S390X for
// "s390x", arch.Unknown otherwise.
func (h *Header) Machine() arch.Arch {
	switch h.Arch {
	case "x86_64", "amd64":
		return arch.AMD64
	case "aarch64", "arm64":
		return arch.ARM64
	case "s390x":
		return arch.S390X
	}
	return arch.Unknown
}

// cursor reads a feature section, every read checked against its end.
type cursor struct {
	b   []byte
	p   int
	o   binary.ByteOrder
	off int64 // offset of b[0] in the input
	err *Error
}

func (c *cursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = errorf(ErrBadFeature, c.off+int64(c.p), format, args...)
	}
}

func (c *cursor) left() int { return len(c.b) - c.p }

func (c *cursor) bytes(n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > c.left() {
		c.fail("needs %d bytes, %d left", n, c.left())
		return nil
	}
	b := c.b[c.p : c.p+n]
	c.p += n
	return b
}

func (c *cursor) u32() uint32 {
	if b := c.bytes(4); b != nil {
		return c.o.Uint32(b)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if b := c.bytes(8); b != nil {
		return c.o.Uint64(b)
	}
	return 0
}

// str reads a perf_header_string: a 32-bit length, then that many bytes
// holding a NUL-terminated, zero-padded string.
func (c *cursor) str() string {
	n := c.u32()
	b := c.bytes(int(min(n, 1<<31-1)))
	return cstring(b)
}

// cstring returns b up to its first NUL.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// count reads a 32-bit count of items of at least minSize bytes each and
// checks it against what is left, so that no caller allocates for items
// that cannot be there.
func (c *cursor) count(minSize int) int {
	n := c.u32()
	if c.err == nil && uint64(n)*uint64(minSize) > uint64(c.left()) {
		c.fail("count %d of items of %d+ bytes exceeds the %d bytes left", n, minSize, c.left())
		return 0
	}
	return int(n)
}

// parseFeature decodes feature f from its section b (at offset off) into h.
// Features this package does not interpret are only kept raw.
func (h *Header) parseFeature(f Feature, b []byte, off int64, attrs func() []*Attr) error {
	h.Features.set(f)
	h.featData[f] = b
	c := &cursor{b: b, o: h.ByteOrder, off: off}
	// The features that are one string, and their fields.
	strs := [...]*string{FeatHostname: &h.Hostname, FeatOSRelease: &h.OSRelease, FeatVersion: &h.Version,
		FeatArch: &h.Arch, FeatCPUDesc: &h.CPUDesc, FeatCPUID: &h.CPUID}
	if f >= 0 && int(f) < len(strs) && strs[f] != nil {
		*strs[f] = c.str()
	}
	switch f {
	case FeatNrCPUs:
		h.NrCPUsAvail = c.u32()
		h.NrCPUsOnline = c.u32()
	case FeatTotalMem:
		h.TotalMemKB = c.u64()
	case FeatSampleTime:
		h.SampleTimeFirst = c.u64()
		h.SampleTimeLast = c.u64()
	case FeatCmdline:
		n := c.count(4)
		h.Cmdline = make([]string, 0, n)
		for i := 0; i < n && c.err == nil; i++ {
			h.Cmdline = append(h.Cmdline, c.str())
		}
	case FeatPMUMappings:
		n := c.count(8)
		h.PMUMappings = make([]PMUMapping, 0, n)
		for i := 0; i < n && c.err == nil; i++ {
			t := c.u32()
			h.PMUMappings = append(h.PMUMappings, PMUMapping{Type: t, Name: c.str()})
		}
	case FeatDirFormat:
		h.DirVersion = c.u64()
	case FeatCompressed:
		h.Compression = Compression{Version: c.u32(), Type: c.u32(), Level: c.u32(), Ratio: c.u32(), MmapLen: c.u32()}
	case FeatBuildID:
		for c.err == nil && c.left() > 0 {
			start := c.p
			hdr := c.bytes(8)
			if hdr == nil {
				break
			}
			size := int(h.ByteOrder.Uint16(hdr[6:]))
			if size < buildIDRecordMin || size > c.left()+8 {
				c.p = start
				c.fail("build-ID entry of size %d", size)
				break
			}
			body := c.bytes(size - 8)
			bid, err := parseBuildID(h.ByteOrder, Misc(h.ByteOrder.Uint16(hdr[4:])), body)
			if err != nil {
				c.p = start
				c.fail("%s", err.Msg)
				break
			}
			h.BuildIDs = append(h.BuildIDs, bid)
		}
	case FeatEventDesc:
		h.parseEventDesc(c, attrs())
	}
	if c.err != nil {
		c.err.Msg = f.String() + ": " + c.err.Msg
		return c.err
	}
	return nil
}

// buildIDRecordMin is the size of a build-ID entry without file name:
// header, pid and the 24-byte build-ID field.
const buildIDRecordMin = 8 + 4 + 24

// parseBuildID decodes a build-ID entry after its 8-byte header.
func parseBuildID(o binary.ByteOrder, misc Misc, body []byte) (BuildID, *Error) {
	if len(body) < buildIDRecordMin-8 {
		return BuildID{}, errorf(ErrBadRecord, 0, "build-ID entry of %d bytes", len(body)+8)
	}
	n := 20
	if misc&MiscBuildIDSize != 0 {
		n = int(body[4+20])
		if n > 20 {
			return BuildID{}, errorf(ErrBadRecord, 0, "build-ID size %d", n)
		}
	}
	return BuildID{
		Misc:     misc,
		Pid:      int32(o.Uint32(body)),
		ID:       append([]byte(nil), body[4:4+n]...),
		Filename: cstring(body[28:]),
	}, nil
}

// parseEventDesc names the events from the EVENT_DESC feature, matching
// each description to an attribute by its first ID, else by position.
func (h *Header) parseEventDesc(c *cursor, attrs []*Attr) {
	nr := c.count(8)
	size := int(c.u32())
	if c.err != nil {
		return
	}
	if size < AttrSizeVer0 || size > maxAttrSize {
		c.fail("attribute size %d", size)
		return
	}
	if uint64(nr)*uint64(size+8) > uint64(c.left()) {
		c.fail("%d events of %d+ bytes exceed the %d bytes left", nr, size+8, c.left())
		return
	}
	byID := make(map[uint64]*Attr)
	for _, x := range attrs {
		for _, id := range x.IDs {
			byID[id] = x
		}
	}
	for i := 0; i < nr && c.err == nil; i++ {
		c.bytes(size)
		nids := c.count(8)
		name := c.str()
		ids := c.bytes(8 * nids)
		if c.err != nil {
			return
		}
		var a *Attr
		if nids > 0 {
			a = byID[h.ByteOrder.Uint64(ids)]
		}
		if a == nil && i < len(attrs) {
			a = attrs[i]
		}
		if a != nil && a.Name == "" {
			a.Name = name
		}
	}
}

// parseFileHeader decodes the file header, the attribute section and the
// feature sections of a file-mode recording held in b.
func parseFileHeader(b []byte) (*Header, error) {
	if len(b) < 16 {
		return nil, errorf(ErrTruncated, 0, "%d bytes, too short for a perf.data header", len(b))
	}
	h := &Header{}
	switch binary.LittleEndian.Uint64(b) {
	case magicLE:
		h.ByteOrder = binary.LittleEndian
	case magicBE:
		h.ByteOrder = binary.BigEndian
	default:
		if string(b[:8]) == "PERFFILE" {
			return nil, errorf(ErrBadMagic, 0, "version 1 perf.data (PERFFILE) is not supported")
		}
		return nil, errorf(ErrBadMagic, 0, "magic %q is not PERFILE2", b[:8])
	}
	o := h.ByteOrder
	hsize := o.Uint64(b[8:])
	if hsize == pipeHeaderSize {
		h.Pipe = true
		return h, nil
	}
	if hsize != fileHeaderSize && hsize != oldFileHeaderSize {
		return nil, errorf(ErrBadHeader, 8, "header size %d (want %d, %d or %d)", hsize, fileHeaderSize, oldFileHeaderSize, pipeHeaderSize)
	}
	if uint64(len(b)) < hsize {
		return nil, errorf(ErrTruncated, 0, "header of %d bytes, file of %d", hsize, len(b))
	}
	size := uint64(len(b))
	if do := o.Uint64(b[40:]); do > size {
		// perf record writes the header and attributes first: a file
		// that ends before its data section was cut short.
		return nil, errorf(ErrTruncated, 40, "the file (%#x bytes) ends before its data section at %#x", size, do)
	}
	attrSize := o.Uint64(b[16:])
	aoff, asize, err := fileSection(b, o, 24)
	if err != nil {
		return nil, err
	}
	// The data section may run past the end of a truncated file, or have
	// size 0 if perf record was killed: read what there is.
	h.DataOffset, h.DataSize = int64(o.Uint64(b[40:])), int64(o.Uint64(b[48:]))
	if h.DataOffset < int64(hsize) || h.DataOffset > int64(size) || h.DataSize < 0 {
		return nil, errorf(ErrBadHeader, 40, "data section at %#x of %#x bytes in a file of %#x", uint64(h.DataOffset), uint64(h.DataSize), size)
	}
	h.statedDataSize = h.DataSize
	if h.DataSize > int64(size)-h.DataOffset || h.DataSize == 0 && h.DataOffset < int64(size) {
		h.DataSize = int64(size) - h.DataOffset
		h.Truncated = true
	}
	if hsize == fileHeaderSize {
		for i := range h.Features {
			h.Features[i] = o.Uint64(b[72+8*i:])
		}
	}

	if err := h.parseAttrs(b, attrSize, aoff, asize); err != nil {
		return nil, err
	}
	h.parseFeatureSections(b)
	return h, nil
}

// parseAttrs reads the attributes, asize bytes at aoff in entries of
// attrSize bytes: each an attribute followed by the section of its IDs.
// The IDs of all attributes together must fit in the file, so that
// overlapping sections cannot multiply memory.
func (h *Header) parseAttrs(b []byte, attrSize uint64, aoff, asize int64) error {
	o := h.ByteOrder
	if asize == 0 {
		return nil
	}
	if attrSize < AttrSizeVer0+fileSectionSize || attrSize > maxAttrSize+fileSectionSize {
		return errorf(ErrBadHeader, 16, "attribute entry size %d", attrSize)
	}
	n := asize / int64(attrSize)
	if n > maxAttrs {
		return errorf(ErrLimit, aoff, "%d attributes (limit %d)", n, maxAttrs)
	}
	var totalIDs int64
	for i := int64(0); i < n; i++ {
		at := aoff + i*int64(attrSize)
		ent := b[at : at+int64(attrSize)]
		a, err := parseAttr(ent[:len(ent)-fileSectionSize], o, at)
		if err != nil {
			return err
		}
		// perf reads the ID section right after the attribute's own
		// size, which equals attr_size less 16 in every perf version.
		if int64(a.Size)+fileSectionSize != int64(attrSize) {
			return errorf(ErrBadAttr, at, "attribute size %d in entries of %d", a.Size, attrSize)
		}
		ioff, isz, err := fileSection(b, o, int(at)+int(a.Size))
		if err != nil {
			return err
		}
		if isz%8 != 0 {
			return errorf(ErrBadAttr, at, "ID section of %d bytes", isz)
		}
		totalIDs += isz / 8
		if totalIDs > int64(len(b))/8 {
			return errorf(ErrLimit, at, "ID sections add up to more than the file")
		}
		a.IDs = make([]uint64, isz/8)
		for j := range a.IDs {
			a.IDs[j] = o.Uint64(b[ioff+int64(j)*8:])
		}
		a.Index = len(h.Attrs)
		h.Attrs = append(h.Attrs, a)
	}
	return nil
}

// parseFeatureSections reads the feature sections the header's bits
// announce; an error is kept in FeatureErr, not returned, since the
// samples are readable without them.
func (h *Header) parseFeatureSections(b []byte) {
	// Feature sections: a table of (offset, size), one per set bit in bit
	// order, right after the data section.
	if h.Truncated {
		h.Features = FeatureSet{}
		return
	}
	tab := h.DataOffset + h.DataSize
	i := 0
	for f := Feature(0); f < NumFeatureBits; f++ {
		if !h.Features.Has(f) {
			continue
		}
		at := tab + int64(i)*fileSectionSize
		i++
		if at+fileSectionSize > int64(len(b)) {
			h.FeatureErr = errorf(ErrTruncated, at, "feature table entry of %s past the end of the file", f)
			break
		}
		off, sz, err := fileSection(b, h.ByteOrder, int(at))
		if err != nil {
			e := err.(*Error)
			e.Msg = f.String() + ": " + e.Msg
			h.FeatureErr = e
			break
		}
		if err := h.parseFeature(f, b[off:off+sz], off, func() []*Attr { return h.Attrs }); err != nil {
			h.FeatureErr = err
			break
		}
	}
}

// fileSection reads the (offset, size) pair at b[at:], a section that
// must lie inside the file b. One that starts in the file and runs past
// its end is of a file cut short (ErrTruncated), as perf record leaves
// the sections it writes last when a copy of its file is partial.
func fileSection(b []byte, o binary.ByteOrder, at int) (int64, int64, error) {
	size := uint64(len(b))
	off, sz := o.Uint64(b[at:]), o.Uint64(b[at+8:])
	switch {
	case off > size:
		return 0, 0, errorf(ErrBadHeader, int64(at), "section [%#x, +%#x) outside the file of %#x bytes", off, sz, size)
	case sz > size-off:
		return 0, 0, errorf(ErrTruncated, int64(at), "section [%#x, +%#x) runs past the end of the file (%#x bytes)", off, sz, size)
	}
	return int64(off), int64(sz), nil
}
