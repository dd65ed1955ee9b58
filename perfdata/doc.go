// Package perfdata reads perf.data recordings, the files that perf record
// writes (and the stream of perf record -o -), written from the format's
// documentation (tools/perf/Documentation/perf.data-file-format.txt and
// include/uapi/linux/perf_event.h of Linux).
//
// It reads both formats: the file format, whose header and features are
// read through a mapping and whose records are read with pread into
// chunks reused as they empty (touching a mapped page costs more than
// copying it, and a mapping read to its end stays resident), and the pipe
// format, from memory or as a stream; files
// written by little- and big-endian machines; the event attributes, with
// records matched to their event by sample ID when there are several; the
// feature sections (build IDs, host, kernel release, architecture, CPU
// counts, command line, event names, sample times, compression); the
// sample_id trailers of non-sample records; every sample_type field;
// COMPRESSED records (perf record -z), decompressed on the fly; the
// directory that perf record --threads writes (Open), its data.N files'
// records merged with the header file's in one time order, as perf script
// merges them.
//
// Reader.Next returns one Record at a time, valid until the next call,
// without allocating per record; typed accessors (Sample, Mmap, Comm, ...)
// return decoded views. Records come in file order, or in perf's time
// order (SetTimeOrder), the order perf report and perf script process
// them in.
//
//	r, err := perfdata.Open("perf.data")
//	if err != nil { ... }
//	defer r.Close()
//	r.SetTimeOrder(true)
//	for {
//		rec, err := r.Next()
//		if err == io.EOF { break }
//		if err != nil { ... }       // an *Error naming the offset
//		if s := rec.Sample(); s != nil {
//			sp, _ := s.RegsUser.Get(perfdata.PerfRegX86SP)
//			stack := s.StackUser // the copy of the stack from sp up
//			...
//		}
//	}
//
// Records from elsewhere in the kernel's layout, such as those of a live
// perf_event ring buffer (package perfevent), decode into the same types
// through a Decoder (NewDecoder, with the events' attributes from
// ParseAttr), so that one path serves recordings and live sessions.
//
// # Untrusted input
//
// A recording is untrusted input. Every size and count is checked against
// the bytes that hold it before use; nothing is allocated in proportion to
// a count that has not been checked against the input's size; errors are
// *Error values naming the offset, returned after the records that could
// be read. The limits:
//
//   - a record is at most 64 KiB (its size field has 16 bits); the data
//     that follows HEADER_TRACING_DATA and AUXTRACE records is skipped,
//     and must lie within the input;
//   - at most 65536 events; the ID sections of a file's events add up to
//     at most the file's size;
//   - an attribute of at most 4 KiB;
//   - decompression: one COMPRESSED record yields at most perf's
//     ring-buffer size plus 64 KiB (64 MiB when the recording does not
//     say), never more than 64 MiB, and all of them together at most 1024
//     times the compressed bytes read plus 16 MiB;
//     the zstd window is at most 64 MiB (Limits adjusts the first two);
//   - a perf.data directory has at most 65536 data.N files; one is open
//     at a time, while a turn's 2 MiB of its records are read (a FIFO or
//     device among them is left out without being opened, as perf leaves
//     it out); a file no longer the one listed, or shorter, ends the
//     reading with an error naming it (Error.File);
//   - time order holds at most 64 MiB of queued records before
//     releasing the older half early, as perf does when its queue is full
//     (Limits.MaxQueued); a directory's records, which perf record
//     writes without rounds, all queue until half this bound or the end;
//     past half, its files (up to 4096 of them) are read in turns by time
//     and released as far as all have come, so that files filled at
//     uneven rates still come in time order.
//
// A mapped file must not shrink while it is read (perf maps its input the
// same way).
package perfdata
