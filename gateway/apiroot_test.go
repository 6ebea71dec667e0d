package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// libraryForm builds the URL of a call the way one library does from its
// API root.
type libraryForm struct {
	name string
	// call returns the URL of method under root; file that of a file
	// download (nil: the library downloads no files).
	call, file func(root, token, method string) string
}

// concat is root + "/bot<token>/<method>": grammY, node-telegram-bot-api,
// go-telegram/bot (WithServerURL), telego (WithAPIServer).
func concat(root, token, method string) string { return root + "/bot" + token + "/" + method }

func concatFile(root, token, path string) string { return root + "/file/bot" + token + "/" + path }

// resolve is Telegraf's new URL(`./bot${token}/${method}`, apiRoot).
func resolve(root, rel string) string {
	base, err := url.Parse(root)
	if err != nil {
		panic(err)
	}
	ref, err := url.Parse(rel)
	if err != nil {
		panic(err)
	}
	return base.ResolveReference(ref).String()
}

var libraryForms = []libraryForm{
	{name: "grammY", call: concat, file: concatFile},                // `${apiRoot}/bot${token}/${method}`
	{name: "node-telegram-bot-api", call: concat, file: concatFile}, // `${baseApiUrl}/bot${token}/${method}`
	{name: "go-telegram/bot WithServerURL", call: concat},           // serverURL + "/bot" + token + "/" + method
	{name: "telego WithAPIServer", call: concat, file: concatFile},  // server + "/bot" + token + "/" + method
	{name: "aiogram TelegramAPIServer.from_base", // base.rstrip("/") + "/bot{token}/{method}"
		call: func(root, token, method string) string { return concat(strings.TrimRight(root, "/"), token, method) },
		file: func(root, token, path string) string { return concatFile(strings.TrimRight(root, "/"), token, path) }},
	{name: "Telegraf", // new URL(`./bot${token}/${method}`, apiRoot); getFileLink likewise with ./file/bot
		call: func(root, token, method string) string { return resolve(root, "./bot"+token+"/"+method) },
		file: func(root, token, path string) string { return resolve(root, "./file/bot"+token+"/"+path) }},
	{name: "python-telegram-bot base_url", // base_url + token, then "/" + method; base_file_url = root + "/file/bot"
		call: func(root, token, method string) string { return root + token + "/" + method },
		file: func(root, token, path string) string { return root + "/file/bot" + token + "/" + path }},
	// The root given a trailing slash by hand (grammY refuses one).
	{name: "node-telegram-bot-api, root with a trailing slash", call: func(root, token, method string) string { return concat(root+"/", token, method) }},
	{name: "Telegraf, root with a trailing slash", call: func(root, token, method string) string { return resolve(root+"/", "./bot"+token+"/"+method) }},
	{name: "python-telegram-bot, base_url with a trailing slash", call: func(root, token, method string) string { return root + "/" + token + "/" + method }},
}

// announcedRoot forwards update id's attempt through a real Forwarder to
// an app that records the Tgrelay-Api-Root header, and returns it as it
// arrived.
func announcedRoot(t *testing.T, f *fixture, id intake.Identity) string {
	t.Helper()
	roots := make(chan string, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		roots <- r.Header.Get(wire.HeaderAPIRoot)
	}))
	defer app.Close()
	fw, err := forward.New(forward.Config{URL: app.URL, APIRoot: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"update_id":%d,"message":{"chat":{"id":%d}}}`, id.UpdateID, f.chat.ID)
	if err := fw.Handle(t.Context(), intake.Update{ID: id.UpdateID, Body: []byte(body)}, intake.Attempt{Identity: id}); err != nil {
		t.Fatal(err)
	}
	return <-roots
}

// TestAnnouncedRootEveryLibrary: the API root a forward announces, taken
// exactly as it arrives, works as each major library's API root, whichever
// way the library joins it with the call: every form reaches the gateway
// as the attempt's call of the right method (fenced, journaled under the
// attempt's identity, sent once), and the same URL after the update was
// claimed again is refused as stale. File downloads go through likewise.
func TestAnnouncedRootEveryLibrary(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	user := telegramtest.User{ID: f.chat.UserID}
	photo, err := f.tg.Send(f.chat, user, telegramtest.UserMessage{Photo: &telegramtest.UserFile{Name: "cat.jpg", Data: []byte("meow")}})
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
	fileID := upd.Message.Photo[len(upd.Message.Photo)-1].FileID

	for i, lib := range libraryForms {
		t.Run(lib.name, func(t *testing.T) {
			// A chat of its own: Telegram's per-chat limit does not pace the cases.
			chat, err := f.tg.NewPrivateChat(f.tg.NewUser(fmt.Sprint("User", i)))
			if err != nil {
				t.Fatal(err)
			}
			id := f.claim(t, int64(1000+i))
			root := announcedRoot(t, f, id)
			if want := f.srv.URL + fmt.Sprintf("/a/%d/%d/%s/bot", id.UpdateID, id.Attempt, id.ClaimID); root != want {
				t.Fatalf("announced root %q; want %q", root, want)
			}
			text := "via " + lib.name
			u := lib.call(root, f.tg.Token, "sendMessage")
			r := postJSON(t, u, map[string]any{"chat_id": chat.ID, "text": text})
			if r.status != http.StatusOK || !r.env.OK {
				t.Fatalf("POST %s = %d %s", redact(u, f.tg.Token), r.status, r.body)
			}
			if n := len(f.tg.MessagesTo(chat.ID)); n != 1 {
				t.Errorf("the chat holds %q %d times; want once", text, n)
			}
			e := nextEvent(t, f)
			if e.Method != "sendMessage" || !e.Fenced || e.Outcome != wire.OutcomeAnswered {
				t.Errorf("the call was seen as %+v; want a fenced, answered sendMessage", e)
			}
			journal, err := f.store.Journal(t.Context(), id.UpdateID)
			if err != nil {
				t.Fatal(err)
			}
			if len(journal) != 1 || journal[0].Method != "sendMessage" || journal[0].Attempt != id.Attempt || journal[0].ClaimID != id.ClaimID {
				t.Errorf("journal of update %d = %+v; want the one sendMessage of attempt %+v", id.UpdateID, journal, id)
			}

			if lib.file != nil {
				g := postJSON(t, lib.call(root, f.tg.Token, "getFile"), map[string]any{"file_id": fileID})
				var file struct {
					FilePath string `json:"file_path"`
				}
				if g.status != http.StatusOK || json.Unmarshal(g.env.Result, &file) != nil || file.FilePath == "" {
					t.Fatalf("getFile = %d %s", g.status, g.body)
				}
				nextEvent(t, f)
				fu := lib.file(root, f.tg.Token, file.FilePath)
				resp, err := http.Get(fu)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(b) != "meow" {
					t.Errorf("GET %s = %d %q; want 200 meow", redact(fu, f.tg.Token), resp.StatusCode, b)
				}
				if e := nextEvent(t, f); e.Method != "file" || !e.Fenced {
					t.Errorf("the download was seen as %+v; want a fenced file download", e)
				}
			}

			// Claimed again, the update's old root is stale: the same URL is
			// refused and nothing is sent.
			f.fail(t, id)
			f.reclaim(t, id.UpdateID)
			r = postJSON(t, u, map[string]any{"chat_id": chat.ID, "text": text + ", stale"})
			if r.status != http.StatusConflict {
				t.Errorf("the old attempt's call = %d %s; want 409", r.status, r.body)
			}
			nextEvent(t, f)
			if n := len(f.tg.MessagesTo(chat.ID)); n != 1 {
				t.Errorf("a stale attempt's call reached the chat")
			}
		})
	}
}

// TestRouteForms: the gateway's reading of a call's path under the
// announced root, form by form, including the ones it refuses.
func TestRouteForms(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.claim(t, 1)
	tok := f.tg.Token
	attempt := fmt.Sprintf("/a/%d/%d/%s", id.UpdateID, id.Attempt, id.ClaimID)
	for _, c := range []struct {
		path   string
		status int
		fenced bool
	}{
		{attempt + "/bot/bot" + tok + "/getMe", 200, true},
		{attempt + "/bot" + tok + "/getMe", 200, true},
		{attempt + "/bot//bot" + tok + "/getMe", 200, true},
		{attempt + "//bot/bot" + tok + "/getMe", 200, true},
		{attempt + "/bot/" + tok + "/getMe", 200, true},
		{"/bot/bot" + tok + "/getMe", 200, false},
		{"/bot" + tok + "/getMe", 200, false},
		{attempt + "/bot/bot" + tok + "x/getMe", 401, true}, // another token
		{attempt + "/bot/bot/bot" + tok + "/getMe", 401, true},
		{attempt + "/bot", 401, true},
		{attempt + "/x/bot" + tok + "/getMe", 404, true},
		{"/a/1/1/bot" + tok + "/getMe", 400, true}, // no claim id: the token read as one
	} {
		r := f.post(t, c.path, nil, map[string]any{})
		if r.status != c.status {
			t.Errorf("%s = %d %s; want %d", redact(c.path, tok), r.status, r.body, c.status)
		}
		if e := nextEvent(t, f); e.Fenced != c.fenced {
			t.Errorf("%s: fenced %v; want %v", redact(c.path, tok), e.Fenced, c.fenced)
		}
	}
}

func postJSON(t *testing.T, u string, params any) reply {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

func nextEvent(t *testing.T, f *fixture) gateway.CallEvent {
	t.Helper()
	select {
	case e := <-f.events:
		return e
	case <-time.After(10 * time.Second): // the event follows the answer; this bounds a lost one
		t.Fatal("the gateway reported no call")
		return gateway.CallEvent{}
	}
}

func redact(s, token string) string { return strings.ReplaceAll(s, token, "<token>") }
