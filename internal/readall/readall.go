// Package readall reads a body whole, up to a bound, into a buffer that
// grows with what arrives and, for a small body, is sized once by the
// length the body declares.
//
// io.ReadAll starts at 512 bytes and grows, so a 100-byte Bot API call
// costs a 512-byte buffer and a 1 KiB one besides; a body read here with its
// declared length costs one buffer of that length and a byte. A large
// declaration is not believed up front: a peer that declares a megabyte
// and sends nothing (or trickles it) holds no more memory than it sent
// and a small first buffer, where allocating what it declared would let
// each such connection pin it for as long as it keeps the connection.
package readall

import (
	"io"
	"slices"
)

// minGrowth is the buffer a body of unknown length starts with, and the
// least a full buffer grows by.
const minGrowth = 512

// maxUpfront bounds the buffer a declared length sizes before a byte was
// read; larger bodies grow as they arrive.
const maxUpfront = 16 << 10

// Bounded reads r until it ends or limit bytes were read, whichever comes
// first, and returns what it read (so a result of limit bytes means r may
// hold more). declared is the length r says it has, -1 when unknown: a
// declaration up to 16 KiB sizes the buffer, one byte more than it to
// find the end. A declared length that is wrong changes nothing but the
// allocations: r is read to its end, or to limit, all the same. A nil
// error means r ended or limit was reached; like io.ReadAll, an EOF is not
// an error. On another error it returns what it read before it.
func Bounded(r io.Reader, declared, limit int64) ([]byte, error) {
	size := min(minGrowth, limit)
	if declared >= 0 && declared < limit && declared < maxUpfront {
		size = declared + 1
	}
	return Into(make([]byte, 0, max(size, 1)), r, limit)
}

// Into appends what r yields to b until r ends or b holds limit bytes. A
// full b grows by its own size (at least 512 bytes, at most to limit), so
// the memory follows what arrived. Its results are Bounded's.
func Into(b []byte, r io.Reader, limit int64) ([]byte, error) {
	for int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(limit-int64(len(b)), int64(max(cap(b), minGrowth)))))
		}
		n, err := r.Read(b[len(b):int(min(int64(cap(b)), limit))])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
