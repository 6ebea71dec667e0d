package readall_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tgrelay/tgrelay/internal/readall"
)

// Whatever length a body declares, Bounded returns exactly what io.ReadAll
// of the same body, limited, returns.
func TestBoundedMatchesReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 100, 511, 512, 513, 4096, 70000} {
		body := strings.Repeat("x", n)
		for _, limit := range []int64{1, 100, 512, 4097, 1 << 20} {
			want, _ := io.ReadAll(io.LimitReader(strings.NewReader(body), limit))
			for _, declared := range []int64{-1, 0, 1, int64(n) / 2, int64(n) - 1, int64(n), int64(n) + 1, 10*int64(n) + 10} {
				for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body)), iotest.DataErrReader(strings.NewReader(body))} {
					got, err := readall.Bounded(r, declared, limit)
					if err != nil {
						t.Fatalf("n %d limit %d declared %d: %v", n, limit, declared, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("n %d limit %d declared %d: read %d bytes, want %d", n, limit, declared, len(got), len(want))
					}
				}
			}
		}
	}
}

// A body sized as it declares is read into one buffer, not a growing one.
func TestBoundedAllocatesOnceForATrueLength(t *testing.T) {
	body := []byte(strings.Repeat("y", 300))
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if b, err := readall.Bounded(r, int64(len(body)), 1<<20); err != nil || len(b) != len(body) {
			t.Fatalf("read %d, %v", len(b), err)
		}
	})
	if allocs != 1 {
		t.Errorf("%v allocations a read, want 1", allocs)
	}
}

// A read error other than EOF is returned, with what was read before it.
func TestBoundedReturnsReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom))
	got, err := readall.Bounded(r, 10, 100)
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Fatalf("got %q, %v; want \"abc\" and boom", got, err)
	}
}

// A large declaration is not believed up front: a body that declares
// 900 KiB and sends ten bytes is read into a small buffer, not one of
// what it declared.
func TestBoundedGrowsWithWhatArrives(t *testing.T) {
	b, err := readall.Bounded(strings.NewReader("0123456789"), 900<<10, 2<<20)
	if err != nil || string(b) != "0123456789" {
		t.Fatalf("got %q, %v", b, err)
	}
	if cap(b) > 16<<10 {
		t.Errorf("a 10-byte body declaring 900 KiB holds a buffer of %d bytes", cap(b))
	}
	// Growth follows the bytes: a 100 KiB body sent one byte at a time,
	// read up to a 60 KiB limit, ends in a buffer under twice what
	// arrived.
	body := strings.Repeat("z", 100<<10)
	b, err = readall.Bounded(iotest.OneByteReader(strings.NewReader(body)), -1, 60<<10)
	if err != nil || len(b) != 60<<10 {
		t.Fatalf("read %d, %v; want the 60 KiB limit", len(b), err)
	}
	if cap(b) > 2*len(b) {
		t.Errorf("%d bytes read into a buffer of %d", len(b), cap(b))
	}
}
