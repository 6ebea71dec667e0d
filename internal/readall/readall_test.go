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
