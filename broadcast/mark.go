package broadcast

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
)

// markFile records how far the journal's whole lines have reached, so that
// a journal cut short (whole lines gone, which no crash does to an fsynced
// append-only file) is found: journal.mark holds the length, in bytes, of
// the journal after its last durable flush.
//
// The runner overwrites it in place after each flush's fsync, without an
// fsync of its own: it is never ahead of the durable journal, and after a
// power loss it may lag (weaker detection, never a false alarm). Its form
// is fixed-width, "%020d %08x\n" (the length and the CRC-32C of its 20
// digits), so a write never leaves it longer or mixed.
const markFile = "journal.mark"

const markLen = 20 + 1 + checksumLen + 1

// appendMark encodes a mark of length n.
func appendMark(b []byte, n int64) []byte {
	digits := fmt.Appendf(nil, "%020d", n)
	return fmt.Appendf(b, "%s %08x\n", digits, crc32.Checksum(digits, castagnoli))
}

// readMark returns the journal length the mark records; ok is false when
// there is no mark file. A mark that is not exactly one valid record is an
// error wrapping errBadMark.
func readMark(path string) (n int64, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("broadcast: read journal mark: %w", err)
	}
	if len(b) != markLen || b[20] != ' ' || b[markLen-1] != '\n' {
		return 0, true, errBadMark
	}
	sum, err := strconv.ParseUint(string(b[21:29]), 16, 32)
	if err != nil || crc32.Checksum(b[:20], castagnoli) != uint32(sum) {
		return 0, true, errBadMark
	}
	n, err = strconv.ParseInt(string(b[:20]), 10, 64)
	if err != nil || n < 0 {
		return 0, true, errBadMark
	}
	return n, true, nil
}

var errBadMark = errors.New("broadcast: journal mark unreadable")

// writeMark overwrites the mark at path with n, creating it when absent.
// sync also fsyncs it.
func writeMark(path string, n int64, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("broadcast: write journal mark: %w", err)
	}
	_, err = f.WriteAt(appendMark(nil, n), 0)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("broadcast: write journal mark: %w", err)
	}
	return nil
}
