package forward

import (
	"context"
	"net"
	"net/http/httptrace"
	"testing"
)

// An answer whose first byte was read before its request's first write
// began is stale, and its connection is closed; one read after is not.
func TestFreshnessTellsAnAnswerOlderThanItsRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		readAfter bool // a read returns the answer after the request is written
		stale     bool
	}{
		{"answer read after the request", true, false},
		{"answer already read before the request", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ours, peer := net.Pipe()
			defer peer.Close()
			fc := &freshConn{Conn: ours}
			go func() {
				buf := make([]byte, 64)
				for {
					if _, err := peer.Read(buf); err != nil {
						return
					}
					// Each request is answered, and the first answer
					// carries more than itself.
					if _, err := peer.Write([]byte("answer")); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 64)
			// An earlier request and its answer, with what came after it.
			if _, err := fc.Write([]byte("request 1")); err != nil {
				t.Fatal(err)
			}
			if _, err := fc.Read(buf); err != nil {
				t.Fatal(err)
			}

			var fr freshness
			trace := httptrace.ContextClientTrace(withFreshness(context.Background(), &fr))
			trace.GotConn(httptrace.GotConnInfo{Conn: fc, Reused: true})
			if _, err := fc.Write([]byte("request 2")); err != nil {
				t.Fatal(err)
			}
			if tc.readAfter {
				if _, err := fc.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
			trace.GotFirstResponseByte()
			if got := fr.stale.Load(); got != tc.stale {
				t.Fatalf("stale = %v, want %v", got, tc.stale)
			}
			_, err := fc.Write([]byte("request 3"))
			if closed := err != nil; closed != tc.stale {
				t.Fatalf("after the check, a write returned %v; want the connection closed only when the answer was stale", err)
			}
		})
	}
}
