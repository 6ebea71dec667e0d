package operator_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/operator"
)

// Reference §5.6 case 1: one fingerprint per window; topics keep messages
// apart; the held count rides on the next message after the window.
func TestDedupeRepeatsThroughChannel(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{Dedupe: &operator.DedupeConfig{}})
		start := time.Now()
		for i := 1; i <= 3; i++ {
			ch.Post("Payment pay_"+strconv.Itoa(i)+" expired after "+strconv.Itoa(29+i)+"s", "errors")
		}
		ch.Post("Payment pay_4 expired after 33s", "")
		drain(t, ch)
		if got, want := d.Summary(), []string{
			"Payment pay_2 expired after 31s:repeated", "Payment pay_3 expired after 32s:repeated",
		}; !slices.Equal(got, want) {
			t.Errorf("drops %v, want %v", got, want)
		}
		time.Sleep(time.Until(start.Add(operator.DefaultDedupeWindow)))
		ch.Post("Payment pay_5 expired after 34s", "errors")
		drain(t, ch)
		want := []string{
			"Payment pay_1 expired after 30s",
			"Payment pay_4 expired after 33s",
			"Payment pay_5 expired after 34s\n\n(+2 more like this)",
		}
		if got := srv.Texts(); !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
	})
}

// Reference §5.6 case 2: the budget per window; the over-budget count rides
// on the next window's first message.
func TestDedupeBudgetThroughChannel(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{MinInterval: time.Second, Dedupe: &operator.DedupeConfig{MaxPerWindow: 2}})
		start := time.Now()
		for _, s := range []string{"db", "cache", "queue", "mail", "dns"} {
			ch.Post(s+" is down", "")
		}
		drain(t, ch)
		if got, want := d.Summary(), []string{"queue is down:over-budget", "mail is down:over-budget", "dns is down:over-budget"}; !slices.Equal(got, want) {
			t.Errorf("drops %v, want %v", got, want)
		}
		time.Sleep(time.Until(start.Add(operator.DefaultDedupeWindow)))
		ch.Post("web is down", "")
		drain(t, ch)
		want := []string{"db is down", "cache is down", "web is down\n\n(+3 more messages over the limit)"}
		if got := srv.Texts(); !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
	})
}

// Reference §5.6 case 3: custom fingerprint and custom lines.
func TestDedupeCustomFunctions(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, _ := newChannel(t, client, operator.Config{MinInterval: time.Second, Dedupe: &operator.DedupeConfig{
			Window:       10 * time.Second,
			MaxPerWindow: 1,
			FingerprintFunc: func(text, topic string) string {
				before, _, _ := strings.Cut(text, ":")
				return before
			},
			RepeatedLineFunc:   func(n int) string { return "Ещё таких: " + strconv.Itoa(n) },
			OverBudgetLineFunc: func(n int) string { return "Сверх лимита: " + strconv.Itoa(n) },
		}})
		start := time.Now()
		ch.Post("db: timeout", "")
		ch.Post("db: timeout again", "")
		ch.Post("cache: miss", "")
		drain(t, ch)
		time.Sleep(time.Until(start.Add(10 * time.Second)))
		ch.Post("db: timeout", "")
		drain(t, ch)
		want := []string{"db: timeout", "db: timeout\n\nЕщё таких: 1\n\nСверх лимита: 1"}
		if got := srv.Texts(); !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
	})
}

// Reference §5.6 case 4: exact secret values are masked whole, the longest
// first, in sent texts and in drops alike.
func TestMaskingSecretValues(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{
			SensitiveValues: []string{"", "hunter2", "hunter2-prod-key"},
			Dedupe:          &operator.DedupeConfig{},
		})
		ch.Post("login failed with hunter2-prod-key and hunter2", "")
		ch.Post("login failed with hunter2-prod-key and hunter2", "")
		drain(t, ch)
		const masked = "login failed with [redacted] and [redacted]"
		if got := srv.Texts(); !slices.Equal(got, []string{masked}) {
			t.Errorf("sent %q", got)
		}
		if got := d.Summary(); !slices.Equal(got, []string{masked + ":repeated"}) {
			t.Errorf("drops %q", got)
		}
	})
}

// Reference §5.6 case 6: the window on its own.
func TestDedupeAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := operator.NewDedupe(operator.DedupeConfig{Window: time.Second, MaxPerWindow: 2})
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			text string
			want operator.Verdict
		}{
			{"db down 17", operator.Verdict{Send: true, Text: "db down 17"}},
			{"db down 18", operator.Verdict{Reason: operator.DropRepeated}},
			{"disk full", operator.Verdict{Send: true, Text: "disk full"}},
			{"queue stuck", operator.Verdict{Reason: operator.DropOverBudget}},
		}
		for _, s := range steps {
			if got := d.Admit(s.text, ""); got != s.want {
				t.Errorf("Admit(%q) = %+v, want %+v", s.text, got, s.want)
			}
		}
		if got := d.Flush(); len(got) != 0 {
			t.Errorf("Flush inside the window = %v, want nothing", got)
		}
		time.Sleep(time.Second)
		want := operator.Verdict{Send: true, Text: "db down 19\n\n(+1 more like this)\n\n(+1 more messages over the limit)"}
		if got := d.Admit("db down 19", ""); got != want {
			t.Errorf("Admit after the window = %+v, want %+v", got, want)
		}
		if _, due := d.NextFlush(); due {
			t.Error("nothing is held, yet a flush is due")
		}
	})
}

// Beyond the reference: held counts that no later message carries are
// flushed as a summary once the window has ended, never lost.
func TestDedupeFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := operator.NewDedupe(operator.DedupeConfig{Window: time.Minute, MaxPerWindow: 2})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		d.Admit("db down 1", "ops")
		d.Admit("db down 2", "ops")
		d.Admit("db down 3", "ops")
		d.Admit("disk full", "")
		d.Admit("queue stuck", "")  // over budget
		d.Admit("db down 4", "ops") // still a repeat
		next, ok := d.NextFlush()
		if !ok || next.Sub(start) <= time.Minute {
			t.Fatalf("NextFlush = %v, %v; want just after the window", next.Sub(start), ok)
		}
		time.Sleep(time.Until(next))
		got := d.Flush()
		want := []operator.Summary{
			{Topic: "ops", Text: "db down 4\n\n(+2 more like this)"},
			{Text: "(+1 more messages over the limit)"},
		}
		if !slices.Equal(got, want) {
			t.Errorf("Flush = %q, want %q", got, want)
		}
		if got := d.Flush(); len(got) != 0 {
			t.Errorf("second Flush = %q, want nothing", got)
		}
		// A fingerprint seen again after a flush starts afresh.
		if v := d.Admit("db down 5", "ops"); !v.Send || v.Text != "db down 5" {
			t.Errorf("Admit after flush = %+v", v)
		}
		// FlushAll reports what is held even before it is due.
		d.Admit("db down 6", "ops")
		if got := d.FlushAll(); !slices.Equal(got, []operator.Summary{{Topic: "ops", Text: "db down 6"}}) {
			t.Errorf("FlushAll = %q", got)
		}
	})
}

// Beyond the reference: the channel sends the summary by itself, and Close
// reports held counts as drops.
func TestDedupeFlushThroughChannel(t *testing.T) {
	srv := newBotServer(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := newClient(t, srv)
		ch, d := newChannel(t, client, operator.Config{Topics: map[string]int64{"ops": 5}, Dedupe: &operator.DedupeConfig{Window: time.Minute}})
		ch.Post("db down 1", "ops")
		ch.Post("db down 2", "ops")
		ch.Post("db down 3", "ops")
		time.Sleep(2 * time.Minute)
		drain(t, ch)
		var got []string
		for _, c := range srv.Calls() {
			got = append(got, c.Text+"@"+strconv.FormatInt(c.ThreadID, 10))
		}
		if want := []string{"db down 1@5", "db down 3\n\n(+1 more like this)@5"}; !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}

		ch.Post("disk full", "")
		ch.Post("disk full", "")
		drain(t, ch)
		ch.Close()
		drops := d.Summary()
		if want := "disk full:closed"; drops[len(drops)-1] != want {
			t.Errorf("drops %q, want the held count reported last as %q", drops, want)
		}
	})
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{"payment 17 failed", "payment 18 failed"},
		{"order 123e4567-e89b-12d3-a456-426614174000 lost", "order 9f0c4567-e89b-12d3-a456-426614174999 lost"},
		{"token AbCdEfGhIjKlMnOpQrStUv rejected", "token ZyXwVuTsRqPoNmLkJiHgFe rejected"},
		{strings.Repeat("a", 400) + "x", strings.Repeat("a", 400) + "y"},
	}
	for _, p := range same {
		if a, b := operator.Fingerprint(p[0], "t"), operator.Fingerprint(p[1], "t"); a != b {
			t.Errorf("%q and %q differ: %q vs %q", p[0], p[1], a, b)
		}
	}
	if operator.Fingerprint("x", "a") == operator.Fingerprint("x", "b") {
		t.Error("topics are not kept apart")
	}
	if operator.Fingerprint("disk full", "") == operator.Fingerprint("disk empty", "") {
		t.Error("different words share a fingerprint")
	}
}

func TestNewDedupeValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []operator.DedupeConfig{{Window: -1}, {MaxPerWindow: -1}} {
		if _, err := operator.NewDedupe(cfg); err == nil {
			t.Errorf("NewDedupe(%+v) accepted", cfg)
		}
	}
}
