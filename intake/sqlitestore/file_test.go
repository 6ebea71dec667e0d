package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// poster serves an intake runner on s through its webhook handler (not
// started: nothing is handled, only recorded) and returns a function that
// posts update id and answers the status code.
func poster(t *testing.T, s *sqlitestore.Store) func(id int64) int {
	t.Helper()
	r, err := intake.New(intake.Config{
		Store:   s,
		Handler: func(context.Context, intake.Update) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, InsecureNoSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wh)
	t.Cleanup(srv.Close)
	return func(id int64) int {
		res, err := http.Post(srv.URL, "application/json", strings.NewReader(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":1,"date":1,"chat":{"id":1,"type":"private"},"text":"x"}}`, id)))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
}

// fileEvents collects the background check's answers.
type fileEvents chan error

func (ev fileEvents) next(t *testing.T, what string) error {
	t.Helper()
	select {
	case err := <-ev:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("the background file check never reported %s", what)
		return nil
	}
}

func TestVanishedDatabaseRefusesAcceptsUntilItIsBack(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bot.db")
	events := make(fileEvents, 4)
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{
		FileCheckInterval: 5 * time.Millisecond,
		OnFileChange:      func(err error) { events <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := poster(t, s)
	if code := post(1); code != http.StatusOK {
		t.Fatalf("POST update 1 = %d, want 200", code)
	}

	claim, ok, err := s.Claim(t.Context(), 1, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Hour), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatalf("Claim(1) = %v, %v", ok, err)
	}

	// The directory goes away while the store has the file open.
	moved := filepath.Join(root, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := events.next(t, "the vanished file"); !errors.Is(err, sqlitestore.ErrDatabaseGone) || !strings.Contains(err.Error(), path) {
		t.Fatalf("OnFileChange got %v; want ErrDatabaseGone naming %s", err, path)
	}
	if code := post(2); code != http.StatusServiceUnavailable {
		t.Fatalf("POST update 2 while the database file is gone = %d, want 503 (Telegram delivers it again)", code)
	}
	if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: 3, Body: []byte(`{}`), ReceivedAt: base}); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("Add while the file is gone = %v, want ErrDatabaseGone", err)
	}
	if _, _, err := s.Claim(t.Context(), 1, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 3}); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("Claim while the file is gone = %v, want ErrDatabaseGone", err)
	}
	if err := s.Health(t.Context()); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("Health while the file is gone = %v, want ErrDatabaseGone", err)
	}
	tx, err := s.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if owns, err := s.OwnsTx(t.Context(), tx, claim, base.Add(time.Second)); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("OwnsTx (the fence of a domain write) while the file is gone = %v, %v; want ErrDatabaseGone", owns, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stats(t.Context()); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("Stats (what a readiness probe counts) while the file is gone = %v, want ErrDatabaseGone", err)
	}

	// It comes back: the store recovers by itself.
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	if err := events.next(t, "the file's return"); err != nil {
		t.Fatalf("OnFileChange after the file came back = %v, want nil", err)
	}
	if err := s.Health(t.Context()); err != nil {
		t.Fatalf("Health after the file came back = %v", err)
	}
	if code := post(4); code != http.StatusOK {
		t.Fatalf("POST update 4 after the file came back = %d, want 200", code)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Every update answered 200 survives a restart; the refused ones were
	// never recorded.
	again, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if row, _, err := again.Get(t.Context(), 1); err != nil || row.State != intake.StateProcessing || row.ClaimID != claim.ClaimID {
		t.Errorf("after the restart, update 1 = %+v, %v; want processing under %s", row, err, claim.ClaimID)
	}
	for id, want := range map[int64]bool{1: true, 2: false, 3: false, 4: true} {
		if _, ok, err := again.Get(t.Context(), id); err != nil || ok != want {
			t.Errorf("after the restart, update %d stored = %v, %v; want %v", id, ok, err, want)
		}
	}
}

func TestReplacedDatabaseFileIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bot.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.Health(t.Context())
	if !errors.Is(err, sqlitestore.ErrDatabaseGone) || !strings.Contains(err.Error(), "another file") {
		t.Fatalf("Health with another file at the path = %v, want ErrDatabaseGone saying it is another file", err)
	}
	if _, err := addBatch(t.Context(), s, []intake.Incoming{{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: base}}); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("AddBatch with another file at the path = %v, want ErrDatabaseGone", err)
	}
}

func TestOpenSaysWhenItCreatedTheDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Created() || s.Path() != path {
		t.Errorf("first Open: Created() = %v, Path() = %q; want true, %q", s.Created(), s.Path(), path)
	}
	s.Close()
	s, err = sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Created() {
		t.Error("second Open of the same file says it created it")
	}
	s.Close()
}

func TestMustExistCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	_, err := sqlitestore.Open(t.Context(), missing, sqlitestore.Config{MustExist: true})
	if !errors.Is(err, sqlitestore.ErrNoDatabase) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Open(MustExist) of a missing file = %v, want ErrNoDatabase and fs.ErrNotExist naming the path", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(MustExist) left a file behind: %v", err)
	}
	// An existing file without the table: refused, and left without one.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlitestore.Open(t.Context(), empty, sqlitestore.Config{MustExist: true}); !errors.Is(err, sqlitestore.ErrNotMigrated) {
		t.Fatalf("Open(MustExist) of a database without the table = %v, want ErrNotMigrated", err)
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Fatalf("Open(MustExist) wrote to the database without the table: %v, %v", fi, err)
	}
	// A database the store made opens.
	good := filepath.Join(dir, "good.db")
	s, err := sqlitestore.Open(t.Context(), good, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlitestore.Open(t.Context(), good, sqlitestore.Config{MustExist: true})
	if err != nil {
		t.Fatalf("Open(MustExist) of a current database: %v", err)
	}
	if s.Created() {
		t.Error("Open(MustExist) says it created the database")
	}
	s.Close()
}

// TestVanishedDatabaseToldByTheWriteThatFindsIt: a write that finds the path
// no longer naming the open file tells OnFileChange itself, before it
// returns, and once: the background check (here too slow to run during the
// test) is not the only one that tells. The return is told by the first
// check that sees it, a readiness probe here.
func TestVanishedDatabaseToldByTheWriteThatFindsIt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bot.db")
	var mu sync.Mutex
	var told []error
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{
		FileCheckInterval: sqlitestore.MaxFileCheckInterval, // never ticks within the test
		OnFileChange: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toldSoFar := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), told...)
	}
	post := poster(t, s)
	if code := post(1); code != http.StatusOK {
		t.Fatalf("POST update 1 = %d, want 200", code)
	}
	if got := toldSoFar(); len(got) != 0 {
		t.Fatalf("OnFileChange told %v with the file in place", got)
	}

	moved := filepath.Join(root, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if code := post(2); code != http.StatusServiceUnavailable {
		t.Fatalf("POST update 2 while the database file is gone = %d, want 503", code)
	}
	got := toldSoFar()
	if len(got) != 1 || !errors.Is(got[0], sqlitestore.ErrDatabaseGone) || !strings.Contains(got[0].Error(), path) {
		t.Fatalf("after the write that found the file gone, OnFileChange told %v; want one ErrDatabaseGone naming %s", got, path)
	}
	// Further writes and probes find it gone again but tell nothing new.
	if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: 3, Body: []byte(`{}`), ReceivedAt: base}); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("Add while the file is gone = %v, want ErrDatabaseGone", err)
	}
	if err := s.Health(t.Context()); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
		t.Fatalf("Health while the file is gone = %v, want ErrDatabaseGone", err)
	}
	if got := toldSoFar(); len(got) != 1 {
		t.Fatalf("OnFileChange told %d times for one disappearance: %v", len(got), got)
	}

	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(t.Context()); err != nil {
		t.Fatalf("Health after the file came back = %v", err)
	}
	if got := toldSoFar(); len(got) != 2 || got[1] != nil {
		t.Fatalf("after the probe that found the file back, OnFileChange told %v; want [gone, nil]", got)
	}
	if code := post(4); code != http.StatusOK {
		t.Fatalf("POST update 4 after the file came back = %d, want 200", code)
	}
	if got := toldSoFar(); len(got) != 2 {
		t.Fatalf("OnFileChange told %v; want nothing more after the return", got)
	}
}
