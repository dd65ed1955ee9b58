//go:build libsframe && cgo

// Package libsframe binds the few functions of GNU libsframe (binutils
// 2.40, as installed here by libbinutils) that the benchmarks compare
// against: decode a section and find the FRE for a PC. It exists only to
// measure the peer in the same run; build with -tags libsframe.
//
// The declarations mirror binutils 2.40's sframe-api.h, which Debian does
// not install; the FRE buffer is oversized to be safe across versions.
package libsframe

/*
#cgo LDFLAGS: -l:libsframe.so.0
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct sframe_decoder_ctx sframe_decoder_ctx;
sframe_decoder_ctx *sframe_decode (const char *cf_buf, size_t cf_size, int *errp);
void sframe_decoder_free (sframe_decoder_ctx **dctx);
int sframe_find_fre (sframe_decoder_ctx *ctx, int32_t pc, void *frep);
unsigned int sframe_decoder_get_num_fidx (sframe_decoder_ctx *dctx);

static int find_many(sframe_decoder_ctx *ctx, const int32_t *pcs, int n, int iters) {
	unsigned char fre[64];
	int found = 0;
	for (int i = 0; i < iters; i++)
		if (sframe_find_fre(ctx, pcs[i % n], fre) == 0)
			found++;
	return found;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Decoder is a libsframe decoder context over a copy of the section.
type Decoder struct {
	ctx *C.sframe_decoder_ctx
	buf unsafe.Pointer
}

// Decode makes a libsframe decoder for section data (version 1 only, in
// libsframe 2.40).
func Decode(data []byte) (*Decoder, error) {
	buf := C.CBytes(data)
	var cerr C.int
	ctx := C.sframe_decode((*C.char)(buf), C.size_t(len(data)), &cerr)
	if ctx == nil {
		C.free(buf)
		return nil, fmt.Errorf("sframe_decode failed (%d)", int(cerr))
	}
	return &Decoder{ctx: ctx, buf: buf}, nil
}

// NumFuncs returns the number of functions libsframe sees.
func (d *Decoder) NumFuncs() int { return int(C.sframe_decoder_get_num_fidx(d.ctx)) }

// FindMany looks up iters PCs, cycling through pcs (section-relative, as
// libsframe 2.40 takes them), all inside C so that the cgo call cost is
// paid once; it returns how many were found.
func (d *Decoder) FindMany(pcs []int32, iters int) int {
	if len(pcs) == 0 {
		return 0
	}
	return int(C.find_many(d.ctx, (*C.int32_t)(unsafe.Pointer(&pcs[0])), C.int(len(pcs)), C.int(iters)))
}

// Close frees the decoder.
func (d *Decoder) Close() {
	C.sframe_decoder_free(&d.ctx)
	C.free(d.buf)
}
