// Package readall reads a body whole, up to a bound, into one buffer sized
// by the length the body declares.
//
// io.ReadAll starts at 512 bytes and grows, so a 100-byte Bot API call
// costs a 512-byte buffer and a 1 KiB one besides; a body read here with its
// declared length costs one buffer of that length and a byte.
package readall

import "io"

// minBuffer is the buffer a body of unknown length starts with.
const minBuffer = 512

// maxUpfront bounds the buffer a declared length allocates before a byte
// was read: a peer declaring a gigabyte gets buffers that grow with what
// it sends.
const maxUpfront = 1 << 20

// Bounded reads r until it ends or limit bytes were read, whichever comes
// first, and returns what it read (so a result of limit bytes means r may
// hold more). declared is the length r says it has, -1 when unknown: the
// buffer is sized to it (up to 1 MiB) and one byte more, which finds the
// end. A declared length that is wrong changes nothing but the
// allocations: r is read to its end, or to limit, all the same. A nil
// error means r ended or limit was reached; like io.ReadAll, an EOF is not
// an error. On another error it returns what it read before it.
func Bounded(r io.Reader, declared, limit int64) ([]byte, error) {
	size := min(int64(minBuffer), limit)
	if declared >= 0 && declared < limit && declared <= maxUpfront {
		size = declared + 1
	}
	return Into(make([]byte, 0, max(size, 1)), r, limit)
}

// Into appends what r yields to b until r ends or b holds limit bytes,
// growing b only when it is full.
func Into(b []byte, r io.Reader, limit int64) ([]byte, error) {
	for int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := min(int64(cap(b)), limit)
		n, err := r.Read(b[len(b):room])
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
