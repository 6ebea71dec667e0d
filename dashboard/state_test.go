package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// An unacknowledged exhaustion has the CLI's name on the pages that show states:
// "exhausted".
func TestStateChipSaysExhausted(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ident := exhaustOne(t, st, 3)
	s := serve(t, dashboard.Config{Store: st})
	for _, p := range []string{"/updates", fmt.Sprintf("/updates/%d", ident.UpdateID)} {
		code, page := s.get(t, p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		if !strings.Contains(page, `state-unacked">exhausted</span>`) || strings.Contains(page, "· unacknowledged") {
			t.Errorf("GET %s: want the state chip to say exhausted", p)
		}
	}
}
