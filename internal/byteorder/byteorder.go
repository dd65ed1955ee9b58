// Package byteorder is a byte order as a plain value, for the decoders
// of cfi and perfdata: calls through it inline, unlike calls through the
// binary.ByteOrder interface, which matters in their hot paths (a CFI
// lookup, each field of a perf sample).
package byteorder

import "encoding/binary"

// Order is a byte order: true for big-endian.
type Order bool

// The two orders.
const (
	Little Order = false
	Big    Order = true
)

// Of converts a binary.ByteOrder. The standard orders are told apart
// without a call: probing through the interface makes its 2-byte argument
// escape, an allocation in every cfi.EvalExpression.
func Of(o binary.ByteOrder) Order {
	switch o {
	case binary.ByteOrder(binary.LittleEndian):
		return Little
	case binary.ByteOrder(binary.BigEndian):
		return Big
	}
	return o.Uint16([]byte{0, 1}) == 1
}

// Uint16 decodes 2 bytes in this byte order.
func (e Order) Uint16(b []byte) uint16 {
	if e {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

// Uint32 decodes 4 bytes in this byte order.
func (e Order) Uint32(b []byte) uint32 {
	if e {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

// Uint64 decodes 8 bytes in this byte order.
func (e Order) Uint64(b []byte) uint64 {
	if e {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}
