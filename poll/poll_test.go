package poll_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/poll"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
)

type bundle struct {
	srv    *telegramtest.Server
	client *botapi.Client
	store  *flakyStore
	runner *intake.Runner
	chat   telegramtest.Chat
	user   telegramtest.User
}

// flakyStore is a real SQLite store whose next failAdds adds fail.
type flakyStore struct {
	*sqlitestore.Store
	failAdds atomic.Int32
}

var errInjected = errors.New("injected store failure")

func (s *flakyStore) fail() bool {
	for {
		n := s.failAdds.Load()
		if n <= 0 {
			return false
		}
		if s.failAdds.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (s *flakyStore) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	if s.fail() {
		return false, errInjected
	}
	return s.Store.Add(ctx, u)
}

func (s *flakyStore) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	if s.fail() {
		return nil, errInjected
	}
	return s.Store.AddBatch(ctx, reqs)
}

// AddBatchAs fails like AddBatch: a runner with heartbeats records through
// it.
func (s *flakyStore) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	if s.fail() {
		return nil, errInjected
	}
	return s.Store.AddBatchAs(ctx, reqs, p)
}

func setup(t *testing.T) *bundle {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(srv.Close)
	hc, err := transport.NewClient(transport.Config{MaxResponseBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	client, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "u.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs := &flakyStore{Store: st}
	r, err := intake.New(intake.Config{Store: fs, Handler: func(context.Context, intake.Update) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	u := srv.NewUser("Ada")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{srv: srv, client: client, store: fs, runner: r, chat: chat, user: u}
}

func (b *bundle) send(t *testing.T, n int) []telegramtest.Update {
	t.Helper()
	var out []telegramtest.Update
	for i := range n {
		u, err := b.srv.SendText(b.chat, b.user, "hello "+string(rune('a'+i%26)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func (b *bundle) count(t *testing.T) int {
	t.Helper()
	st, err := b.store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range st.Count {
		n += c
	}
	return n
}

// start runs p in the background and returns a stop func giving Run's error.
func start(t *testing.T, p *poll.Poller) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestRunRecordsRawBytesAndConfirms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sent := b.send(t, 5)
	var batches atomic.Int32
	p, err := poll.New(poll.Config{
		Caller: b.client, AcceptFunc: b.runner.Accept, Timeout: time.Second,
		Observer: poll.Observer{BatchFunc: func(int, int64) { batches.Add(1) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	testkit.WaitFor(t, "5 rows recorded", func() bool { return b.count(t) == 5 })
	testkit.WaitFor(t, "the batch reported", func() bool { return batches.Load() > 0 })
	// Telegram keeps them until the next call confirms: after stopping,
	// Run's confirming call makes it forget them.
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if n := b.srv.PendingUpdates(); n != 0 {
		t.Errorf("PendingUpdates after stop = %d, want 0 (batch confirmed)", n)
	}
	if got, want := p.Offset(), sent[4].ID+1; got != want {
		t.Errorf("Offset = %d, want %d", got, want)
	}
	for _, u := range sent {
		row, ok, err := b.store.Get(context.Background(), u.ID)
		if err != nil || !ok {
			t.Fatalf("Get(%d) = %v, %v", u.ID, ok, err)
		}
		if !bytes.Equal(row.Body, u.JSON) {
			t.Errorf("update %d body = %s, want Telegram's bytes %s", u.ID, row.Body, u.JSON)
		}
	}
	if batches.Load() == 0 {
		t.Error("BatchFunc never called")
	}
	if d := b.srv.DuplicateDeliveries(); len(d) != 0 {
		t.Errorf("duplicate deliveries %v, want none", d)
	}
}

func TestFailedAcceptKeepsOffset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sent := b.send(t, 3)
	b.store.failAdds.Store(1)
	var acceptErrs, batches atomic.Int32
	p, err := poll.New(poll.Config{
		Caller: b.client, AcceptFunc: b.runner.Accept, Timeout: time.Second, MinBackoff: time.Millisecond,
		Observer: poll.Observer{BatchFunc: func(int, int64) { batches.Add(1) }, AcceptErrorFunc: func(id int64, err error) {
			if !errors.Is(err, errInjected) {
				t.Errorf("accept error %v, want the injected one", err)
			}
			acceptErrs.Add(1)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	testkit.WaitFor(t, "3 rows recorded", func() bool { return b.count(t) == 3 })
	testkit.WaitFor(t, "the batch reported", func() bool { return batches.Load() > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if acceptErrs.Load() == 0 {
		t.Fatal("the injected failure never happened")
	}
	// The failed batch was offered again: some update went out twice.
	again := false
	for _, d := range b.srv.Deliveries() {
		if d.Via == "getUpdates" && d.Attempt > 1 {
			again = true
		}
	}
	if !again {
		t.Error("no update was offered again after the failed accept: the offset moved past an unrecorded batch")
	}
	if n := b.srv.PendingUpdates(); n != 0 {
		t.Errorf("PendingUpdates = %d, want 0", n)
	}
	for _, u := range sent {
		if _, ok, _ := b.store.Get(context.Background(), u.ID); !ok {
			t.Errorf("update %d lost", u.ID)
		}
	}
}

func TestTransientErrorsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.srv.Arm(telegramtest.Fault{Method: "getUpdates", Kind: telegramtest.FaultServerError, Times: 2}); err != nil {
		t.Fatal(err)
	}
	b.send(t, 2)
	var errs atomic.Int32
	p, err := poll.New(poll.Config{
		Caller: b.client, AcceptFunc: b.runner.Accept, Timeout: time.Second, MinBackoff: time.Millisecond,
		Observer: poll.Observer{ErrorFunc: func(error, time.Duration) { errs.Add(1) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, p)
	testkit.WaitFor(t, "2 rows recorded", func() bool { return b.count(t) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := errs.Load(); got != 2 {
		t.Errorf("ErrorFunc calls = %d, want 2 (the armed 5xx)", got)
	}
}

func TestFatalRefusals(t *testing.T) {
	t.Parallel()
	t.Run("webhook active", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if _, err := b.client.Call(t.Context(), "setWebhook", map[string]any{"url": "http://127.0.0.1:1/hook"}); err != nil {
			t.Fatal(err)
		}
		p, err := poll.New(poll.Config{Caller: b.client, AcceptFunc: b.runner.Accept, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Run(t.Context())
		if !errors.Is(err, poll.ErrWebhookActive) {
			t.Fatalf("Run = %v, want ErrWebhookActive", err)
		}
		var ae *botapi.APIError
		if !errors.As(err, &ae) || ae.Code != 409 {
			t.Errorf("Run error does not carry the 409 APIError: %v", err)
		}
	})
	t.Run("unauthorized", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bad, err := botapi.New("123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", botapi.Config{APIRoot: b.srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		p, err := poll.New(poll.Config{Caller: bad, AcceptFunc: b.runner.Accept, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); !errors.Is(err, poll.ErrUnauthorized) {
			t.Fatalf("Run = %v, want ErrUnauthorized", err)
		}
	})
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"401", &botapi.APIError{Code: 401, Description: "Unauthorized"}, poll.ErrUnauthorized},
		{"404", &botapi.APIError{Code: 404, Description: "Not Found"}, poll.ErrUnauthorized},
		{"409 webhook", &botapi.APIError{Code: 409, Description: "Conflict: can't use getUpdates method while webhook is active"}, poll.ErrWebhookActive},
		{"409 other poller", &botapi.APIError{Code: 409, Description: "Conflict: terminated by other getUpdates request"}, poll.ErrConflict},
		{"500", &botapi.APIError{Code: 500, Description: "Internal Server Error"}, nil},
		{"429", &botapi.APIError{Code: 429, Description: "Too Many Requests"}, nil},
		{"proxy 404 page", &botapi.APIError{Code: 404, NotJSON: true}, nil},
		{"plain", errors.New("connection reset"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := poll.Classify(tc.err)
			if tc.want == nil {
				if got != nil {
					t.Errorf("classify = %v, want retry", got)
				}
				return
			}
			if !errors.Is(got, tc.want) {
				t.Errorf("classify = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBackoffBounded(t *testing.T) {
	t.Parallel()
	accept := func(context.Context, []byte) (intake.Acceptance, error) { return intake.Accepted, nil }
	p, err := poll.New(poll.Config{Caller: &botapi.Client{}, AcceptFunc: accept, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := p.Backoff(i); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := p.Backoff(1 << 30); got != 50*time.Millisecond {
		t.Errorf("Backoff(huge) = %v, want the cap", got)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	accept := func(context.Context, []byte) (intake.Acceptance, error) { return intake.Accepted, nil }
	caller := &botapi.Client{}
	for _, tc := range []struct {
		name  string
		cfg   poll.Config
		field string
	}{
		{"no caller", poll.Config{AcceptFunc: accept}, "Caller"},
		{"no accept", poll.Config{Caller: caller}, "AcceptFunc"},
		{"timeout fraction", poll.Config{Caller: caller, AcceptFunc: accept, Timeout: 1500 * time.Millisecond}, "Timeout"},
		{"timeout too long", poll.Config{Caller: caller, AcceptFunc: accept, Timeout: 51 * time.Second}, "Timeout"},
		{"negative timeout", poll.Config{Caller: caller, AcceptFunc: accept, Timeout: -time.Second}, "Timeout"},
		{"limit", poll.Config{Caller: caller, AcceptFunc: accept, Limit: 101}, "Limit"},
		{"min backoff", poll.Config{Caller: caller, AcceptFunc: accept, MinBackoff: time.Hour}, "MinBackoff"},
		{"max below min", poll.Config{Caller: caller, AcceptFunc: accept, MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "MaxBackoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := poll.New(tc.cfg)
			if ce, ok := errors.AsType[*poll.ConfigError](err); !ok || ce.Field != tc.field {
				t.Errorf("New = %v, want a *ConfigError naming %s", err, tc.field)
			}
			if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v, want New's %v", verr, err)
			}
		})
	}
}

// The long poll outlasts the transport's default response timeout: the
// poller extends it per call, so an idle poll is not an error.
func TestLongPollOutlastsTransportTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hc, err := transport.NewClient(transport.Config{ResponseTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	client, err := botapi.New(b.srv.Token, botapi.Config{APIRoot: b.srv.URL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	p, err := poll.New(poll.Config{Caller: client, AcceptFunc: b.runner.Accept, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Once(t.Context()); err != nil {
		t.Fatalf("an idle 2 s long poll through a transport with a 1 s response timeout failed: %v", err)
	}
}
