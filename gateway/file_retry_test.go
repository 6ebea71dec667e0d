package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// TestRetryDownloadsAFileAgain: a file download only reads, so it is
// fenced but not journaled: a later attempt of the update downloads the
// file again (a journaled download would be answered unknown, its answer
// too large to journal), and the journal holds no entry for it.
func TestRetryDownloadsAFileAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	user := f.tg.NewUser("Bea")
	chat, err := f.tg.NewPrivateChat(user)
	if err != nil {
		t.Fatal(err)
	}
	photo, err := f.tg.Send(chat, user, telegramtest.UserMessage{Photo: &telegramtest.UserFile{Name: "cat.jpg", Data: []byte("meow")}})
	if err != nil {
		t.Fatal(err)
	}
	var upd struct {
		Message struct {
			Photo []struct {
				FileID string `json:"file_id"`
			} `json:"photo"`
		} `json:"message"`
	}
	if err := json.Unmarshal(photo.JSON, &upd); err != nil || len(upd.Message.Photo) == 0 {
		t.Fatalf("the photo update %s: %v", photo.JSON, err)
	}
	g := f.post(t, "/bot"+f.tg.Token+"/getFile", nil, map[string]any{"file_id": upd.Message.Photo[len(upd.Message.Photo)-1].FileID})
	var file struct {
		FilePath string `json:"file_path"`
	}
	if g.status != http.StatusOK || json.Unmarshal(g.env.Result, &file) != nil || file.FilePath == "" {
		t.Fatalf("getFile = %d %s", g.status, g.body)
	}
	download := func(id intake.Identity) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/file/bot"+f.tg.Token+"/"+file.FilePath, nil)
		if err != nil {
			t.Fatal(err)
		}
		wire.SetIdentity(req.Header, id.UpdateID, id.Attempt, id.ClaimID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	first := f.claim(t, 28)
	if status, body, _ := download(first); status != http.StatusOK || body != "meow" {
		t.Fatalf("attempt 1's download = %d %q; want 200 meow", status, body)
	}
	second := retryAttempt(t, f.store, first)
	if status, body, h := download(second); status != http.StatusOK || body != "meow" || h.Get(gateway.HeaderReplayed) != "" {
		t.Errorf("attempt 2's download = %d %q (replayed %q); want 200 meow, downloaded again", status, body, h.Get(gateway.HeaderReplayed))
	}
	if err := f.gw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if es, err := f.store.Journal(t.Context(), 28); err != nil || len(es) != 0 {
		t.Errorf("Journal(28) = %d entries, %v; want none for downloads", len(es), err)
	}
}
