package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
)

// Defaults and bounds of `tgrelay demo`.
const (
	demoDefaultUsers    = 3
	demoDefaultMessages = 4
	demoMaxUsers        = 20
	demoMaxMessages     = 50
	// demoDefaultTimeout bounds the whole demo.
	demoDefaultTimeout = 90 * time.Second
	// demoPhaseTimeout bounds the wait for one phase's replies.
	demoPhaseTimeout = 45 * time.Second
	// demoBotDelay is the example bot's simulated work per reply, so that
	// updates are in flight when the relay is killed.
	demoBotDelay = 15 * time.Millisecond
	// demoForwardTimeout bounds one forward to the bot. The bot answers
	// only after its reply went through the gateway, and a reply may wait
	// there for its chat's turn: Telegram lets one chat receive
	// throttle.DefaultChatCount messages per throttle.DefaultChatPer, so a
	// user's sixth message in a row, or the sixth reply of the burst,
	// waits up to about that window (a second more when Telegram's own 429
	// asks for a whole-second retry_after, as after the restart, when the
	// new relay's limiter has not seen the old one's sends). The timeout
	// covers that with a second to spare. A shorter one would give up on a
	// reply that is only waiting its turn, and retry the update while its
	// call still waits there.
	demoForwardTimeout = throttle.DefaultChatPer + 2*time.Second
	// demoLease is the relay's lease: serve wants the forward timeout
	// below it. It is also how long the killed relay's attempts stay
	// leased before the restarted relay takes them over.
	demoLease = demoForwardTimeout + time.Second
	// demoInFlightStall is how long the sandbox holds back the rest of its
	// answer to the first reply after the kill is armed: the relay is
	// killed meanwhile, with that call between its journaled intent and
	// its outcome.
	demoInFlightStall = 3 * time.Second
	// demoHeldFor is how long a reply must have been applied at the
	// sandbox without its answer reaching the bot for the demo to take it
	// for the held one: well inside demoInFlightStall, and far longer than
	// an answer the sandbox does not hold takes.
	demoHeldFor = demoInFlightStall / 6
	// demoBurstUser is the name of the user who asks for the burst.
	demoBurstUser = "Zoe"
	// demoSecret is the sandbox webhook's secret (the sandbox is offline).
	demoSecret = "tgrelay_demo_secret"
)

const demoHelp = `
Usage: tgrelay demo [--users N] [--messages N] [--keep] [--hold]

Demo runs tgrelay end to end, offline, in under a minute once built (the
first 'go run' also compiles the pure-Go SQLite driver, which takes a few
minutes on a small machine):

  1. a sandbox Telegram (package telegramtest) with simulated users;
  2. 'tgrelay serve' as a child process, on a SQLite store in a temp dir,
     receiving the sandbox's webhook and forwarding to
  3. an example bot endpoint that echoes every text back through the
     relay's Bot API gateway (on by default; here on a fixed
     --gateway-listen), using the per-update
     API root the relay announces in the Tgrelay-Api-Root header. The
     sandbox keeps Telegram's send limits, the gateway keeps the bot within
     them.

Users chat with the bot. One update is answered, then fails twice at the bot
(500) and is retried: the retries send the same reply again, and the gateway
answers it from its journal instead of sending it twice. One is poison (400):
it becomes an exhaustion, delivered to the bot's exhaustion endpoint and
acknowledged. One asks for a burst of seven replies to one chat, more than
Telegram lets a chat receive at once: the gateway paces them and the bot sees
no 429. A late reply from a stale attempt is refused (409). Then the relay is
killed with SIGKILL while a reply is in flight at Telegram, users keep
writing, and it is restarted; that reply's outcome is unknown, and it is never
sent again.

A live view prints one line per event; the final report is drawn from the
store, its journal, the gateway's answers and the sandbox's ledger. The exit
status is 0 only if every check in the report holds.

The relay's dashboard is up while the demo runs (its address is printed);
with --hold the relay and its dashboard stay up after the report, until
Ctrl-C, so you can look around.
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	users := fs.Int("users", demoDefaultUsers, fmt.Sprintf("simulated users (2..%d)", demoMaxUsers))
	messages := fs.Int("messages", demoDefaultMessages, fmt.Sprintf("messages per user per phase (2..%d)", demoMaxMessages))
	keep := fs.Bool("keep", false, "keep the temp dir (store and relay log) afterwards; it is always kept after a failure")
	parent := fs.String("dir", "", "`directory` to make the temp dir in (default the system's)")
	timeout := fs.Duration("timeout", demoDefaultTimeout, "bound of the whole run")
	relayBin := fs.String("relay-bin", "", "tgrelay `binary` to run serve from (default this executable)")
	hold := fs.Bool("hold", false, "after the report, keep the relay and its dashboard up until Ctrl-C")
	fs.Usage = commandUsage(fs, demoHelp)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	hint := "Run 'tgrelay help demo' for usage."
	if *users < 2 || *users > demoMaxUsers {
		return &usageError{msg: fmt.Sprintf("--users must be 2..%d", demoMaxUsers), hint: hint}
	}
	if *messages < 2 || *messages > demoMaxMessages {
		return &usageError{msg: fmt.Sprintf("--messages must be 2..%d", demoMaxMessages), hint: hint}
	}
	if *timeout <= 0 {
		return &usageError{msg: "--timeout must be positive", hint: hint}
	}
	bin := *relayBin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this executable to run serve: %w", err)
		}
		bin = exe
	}
	dir, err := os.MkdirTemp(*parent, "tgrelay-demo-")
	if err != nil {
		return err
	}
	holdCtx := ctx // --hold waits for Ctrl-C, not for --timeout
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d := &demo{
		hold:     *hold,
		holdCtx:  holdCtx,
		view:     newDemoView(stdout),
		dir:      dir,
		bin:      bin,
		users:    *users,
		messages: *messages,
	}
	err = d.run(ctx)
	if *keep || err != nil {
		// After a failure the relay log explains it: keep it.
		fmt.Fprintf(stdout, "store and relay log kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return err
}

// demoView prints the live view: one line per event, with the time since
// the start. Safe for concurrent use.
type demoView struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newDemoView(w io.Writer) *demoView { return &demoView{w: w, start: time.Now()} }

// demoLabels are the sources of the live view's events; their column is
// as wide as the longest.
var demoLabels = map[string]bool{"demo": true, "sandbox": true, "bot": true, "relay": true, "user": true, "store": true, "dashboard": true}

const demoLabelWidth = len("dashboard")

func (v *demoView) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if label, rest, ok := strings.Cut(line, " "); ok && demoLabels[label] {
		line = fmt.Sprintf("%-*s %s", demoLabelWidth, label, strings.TrimLeft(rest, " "))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	fmt.Fprintf(v.w, "%6.2fs  %s\n", time.Since(v.start).Seconds(), line)
}

// demoMessage is one text a simulated user sent.
type demoMessage struct {
	updateID int64
	chatID   int64
	text     string
	phase    int
}

// demo is one run of `tgrelay demo`.
type demo struct {
	view     *demoView
	dir      string
	bin      string
	users    int
	messages int

	sandbox *telegramtest.Server
	bot     *demoBot
	relay   *demoRelay
	people  []telegramtest.User
	chats   []telegramtest.Chat
	sent    []demoMessage

	burstUser telegramtest.User
	burstChat telegramtest.Chat

	flakyID, poisonID, burstID int64
	inFlightID                 int64 // the update whose reply was in flight at the kill
	killInFlight               int
	sentWhileDown              int
	firstPID, secondPID        int
	dbPath, relayLogPath       string

	hold    bool            // keep the relay up after the report
	holdCtx context.Context // ends --hold (Ctrl-C)
}

func (d *demo) run(ctx context.Context) error {
	d.view.printf("demo   temp dir %s", d.dir)
	d.sandbox = telegramtest.NewServer(telegramtest.Config{
		ControlAPI: true,
		// Telegram's limits, as the gateway's limiter counts them: a bot
		// that ignored them would get 429s.
		Limits: telegramtest.Limits{
			Bot:   telegramtest.Limit{Count: throttle.DefaultBotCount, Per: throttle.DefaultBotPer},
			Chat:  telegramtest.Limit{Count: throttle.DefaultChatCount, Per: throttle.DefaultChatPer},
			Group: telegramtest.Limit{Count: throttle.DefaultGroupCount, Per: throttle.DefaultGroupPer},
		},
		Webhook: telegramtest.WebhookConfig{
			Timeout:     5 * time.Second,
			Backoff:     50 * time.Millisecond,
			MaxBackoff:  500 * time.Millisecond,
			MaxAttempts: 200,
		},
		Logf: func(string, ...any) {},
	})
	defer d.sandbox.Close()
	d.view.printf("sandbox Telegram Bot API at %s", d.sandbox.URL)

	// The example bot, calling the relay's gateway through tgrelay's transport.
	hc, err := transport.NewClient(transport.Config{Proxy: noProxy})
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	d.bot = newDemoBot(hc, d.sandbox.Token, d.view, demoBotDelay)
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	botSrv := &http.Server{Handler: d.bot.handler(), ReadHeaderTimeout: 5 * time.Second}
	botDone := make(chan struct{})
	go func() { defer close(botDone); _ = botSrv.Serve(bl) }()
	defer func() { botSrv.Close(); <-botDone }()
	botURL := "http://" + bl.Addr().String()
	d.view.printf("bot    example echo bot at %s/update (exhaustions: /exhaustion)", botURL)

	// The relay.
	listen, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	admin, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	gw, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	d.dbPath = filepath.Join(d.dir, "tgrelay.db")
	d.relayLogPath = filepath.Join(d.dir, "relay.log")
	logf, err := os.Create(d.relayLogPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	d.relay = &demoRelay{
		bin: d.bin,
		args: []string{
			"--db", d.dbPath,
			"--api-root", d.sandbox.URL,
			"--listen", listen,
			"--path", "/telegram",
			"--public-url", "http://" + listen + "/telegram",
			"--takeover-from", "none",
			"--webhook-check-interval", "0",
			"--forward", botURL + "/update",
			"--exhaustion-forward", botURL + "/exhaustion",
			"--max-attempts", "5",
			"--gateway-listen", gw,
			"--forward-timeout", demoForwardTimeout.String(),
			"--lease", demoLease.String(),
			"--backoff-base", "100ms",
			"--sweep-interval", "200ms",
			"--pending-grace", "200ms",
			"--drain-timeout", "5s",
			"--admin-listen", admin,
		},
		env:       childEnv("TGRELAY_TOKEN="+d.sandbox.Token, "TGRELAY_WEBHOOK_SECRET="+demoSecret),
		adminAddr: admin,
		log:       logf,
	}
	defer d.relay.kill()
	if d.firstPID, err = d.relay.start(ctx); err != nil {
		return err
	}
	d.view.printf("relay  tgrelay serve started (pid %d): webhook %s → %s/update, store %s", d.firstPID, listen, botURL, d.dbPath)
	d.view.printf("relay  Bot API gateway at http://%s: the bot's API root, per update in Tgrelay-Api-Root", gw)
	d.view.printf("dashboard http://%s/ (open it while the demo runs; --hold keeps it up after the report)", admin)

	if err := d.makeUsers(); err != nil {
		return err
	}
	if err := d.phaseOne(ctx); err != nil {
		return err
	}
	if err := d.lateReply(ctx); err != nil {
		return err
	}
	if err := d.phaseTwo(ctx); err != nil {
		return err
	}
	if err := d.sandbox.WaitIdle(ctx); err != nil {
		return fmt.Errorf("sandbox still holds updates: %w", err)
	}
	if err := d.relay.stop(); err != nil {
		d.view.printf("relay  stopped with %v", err)
	} else {
		d.view.printf("relay  stopped (SIGTERM, drained)")
	}
	err = d.report(ctx)
	if d.hold {
		if herr := d.holdOpen(admin); herr != nil {
			return errors.Join(err, herr)
		}
	}
	return err
}

// holdOpen starts the relay again on the same store and sandbox and keeps
// it, with its dashboard, up until Ctrl-C.
func (d *demo) holdOpen(admin string) error {
	pid, err := d.relay.start(d.holdCtx)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.view.w, "\nholding: the relay (pid %d) and its dashboard stay up until Ctrl-C\n  dashboard  http://%s/\n  sandbox    %s%s (control API: make users write)\n",
		pid, admin, d.sandbox.URL, telegramtest.ControlPrefix)
	<-d.holdCtx.Done()
	if err := d.relay.stop(); err != nil {
		d.view.printf("relay  stopped with %v", err)
	}
	return nil
}

// noProxy keeps the demo's loopback calls away from any configured proxy.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

func (d *demo) makeUsers() error {
	names := []string{"Ada", "Bob", "Cleo", "Dev", "Eve", "Finn", "Gus", "Hana", "Ivo", "Jun",
		"Kai", "Lea", "Max", "Nia", "Oto", "Pia", "Quin", "Rui", "Sol", "Tao"}
	for i := range d.users {
		u := d.sandbox.NewUser(names[i])
		c, err := d.sandbox.NewPrivateChat(u)
		if err != nil {
			return err
		}
		d.people = append(d.people, u)
		d.chats = append(d.chats, c)
	}
	d.burstUser = d.sandbox.NewUser(demoBurstUser)
	var err error
	d.burstChat, err = d.sandbox.NewPrivateChat(d.burstUser)
	return err
}

// say makes user i send text.
func (d *demo) say(i int, text string, phase int) (demoMessage, error) {
	return d.sayAs(d.people[i], d.chats[i], text, phase)
}

// sayAs makes user u send text in chat c.
func (d *demo) sayAs(u telegramtest.User, c telegramtest.Chat, text string, phase int) (demoMessage, error) {
	up, err := d.sandbox.SendText(c, u, text)
	if err != nil {
		return demoMessage{}, fmt.Errorf("user %s: %w", u.FirstName, err)
	}
	m := demoMessage{updateID: up.ID, chatID: c.ID, text: text, phase: phase}
	d.sent = append(d.sent, m)
	d.view.printf("user   %s says %q (update %d)", u.FirstName, text, up.ID)
	return m, nil
}

// demoWaitFor polls cond until it holds, failing after limit or when ctx ends.
func demoWaitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
	return nil
}

// phaseOne: every user writes; one message is flaky, one is poison.
func (d *demo) phaseOne(ctx context.Context) error {
	d.view.printf("phase 1: users chat; one update fails twice after its reply, one is poison, one asks for a burst")
	burst, err := d.sayAs(d.burstUser, d.burstChat, "a "+demoBurst+" of replies, please", 1)
	if err != nil {
		return err
	}
	d.burstID = burst.updateID
	ids := []int64{burst.updateID}
	for j := range d.messages {
		for i := range d.users {
			text := fmt.Sprintf("hello %d from %s", j+1, d.people[i].FirstName)
			switch {
			case j == 1 && i == 0:
				text = "this one is " + demoFlaky
			case j == 1 && i == 1:
				text = "a " + demoPoison + " pill"
			}
			m, err := d.say(i, text, 1)
			if err != nil {
				return err
			}
			switch {
			case j == 1 && i == 0:
				d.flakyID = m.updateID
			case j == 1 && i == 1:
				d.poisonID = m.updateID
			default:
			}
			if m.updateID != d.poisonID {
				ids = append(ids, m.updateID)
			}
		}
	}
	return demoWaitFor(ctx, demoPhaseTimeout, "phase 1 replies and the exhaustion", func() bool {
		return d.bot.answered(ids) == len(ids) && d.bot.exhaustionCount() >= 1
	})
}

// lateReply: a handler of the flaky update's first attempt, still running
// after that update was retried and completed, tries to send once more.
func (d *demo) lateReply(ctx context.Context) error {
	var text string
	for _, m := range d.sent {
		if m.updateID == d.flakyID {
			text = demoLatePrefix + m.text
		}
	}
	c, err := d.bot.sendLate(ctx, d.flakyID, 1, d.chats[0].ID, text)
	if err != nil {
		return err
	}
	d.view.printf("bot    a late reply from update %d attempt 1 (retried and completed since) → %d %s, nothing sent", d.flakyID, c.status, c.outcome)
	return nil
}

// phaseTwo: users write while the relay is killed and restarted.
func (d *demo) phaseTwo(ctx context.Context) error {
	d.view.printf("phase 2: users keep writing; the relay is killed (SIGKILL) mid-stream and restarted")
	// The sandbox applies the next reply (it is in the ledger), sends half
	// its answer and stalls: the relay is killed right then, with that
	// call between its journaled intent and its outcome.
	if err := d.sandbox.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultSlowBody, Stall: demoInFlightStall}); err != nil {
		return err
	}
	defer d.sandbox.Disarm()
	var before, all []int64
	half := d.messages / 2
	for j := range half {
		for i := range d.users {
			m, err := d.say(i, fmt.Sprintf("still there? %d from %s", j+1, d.people[i].FirstName), 2)
			if err != nil {
				return err
			}
			before = append(before, m.updateID)
		}
	}
	// The held reply is the phase 2 reply that the sandbox has applied
	// and whose answer the bot has not had for demoHeldFor. Replies the
	// sandbox answers normally reach the bot within milliseconds, and the
	// first one applied need not be the held one: the fault goes to the
	// first call to arrive, and another can be applied before it.
	var inFlight demoMessage
	appliedAt := make(map[int64]time.Time)
	err := demoWaitFor(ctx, demoPhaseTimeout, "the held phase 2 reply at the sandbox", func() bool {
		now := time.Now()
		for _, msg := range d.sandbox.Messages() {
			for _, m := range d.sent {
				if m.phase != 2 || msg.ChatID != m.chatID || msg.Text != demoEchoPrefix+m.text {
					continue
				}
				if d.bot.calls(m.updateID) > 0 {
					delete(appliedAt, m.updateID)
					continue
				}
				at, seen := appliedAt[m.updateID]
				if !seen {
					appliedAt[m.updateID] = now
				} else if now.Sub(at) >= demoHeldFor {
					inFlight = m
					return true
				}
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	d.relay.kill()
	d.inFlightID = inFlight.updateID
	d.killInFlight = len(before) - d.bot.answered(before)
	d.view.printf("relay  SIGKILL (pid %d) while the reply to update %d was in flight at Telegram; %d of %d new updates not yet answered",
		d.firstPID, inFlight.updateID, d.killInFlight, len(before))
	all = append(all, before...)
	for j := half; j < d.messages; j++ {
		for i := range d.users {
			m, err := d.say(i, fmt.Sprintf("still there? %d from %s", j+1, d.people[i].FirstName), 2)
			if err != nil {
				return err
			}
			all = append(all, m.updateID)
			d.sentWhileDown++
		}
	}
	d.view.printf("sandbox %d updates wait for the webhook while the relay is down", d.sandbox.PendingUpdates())
	if d.secondPID, err = d.relay.start(ctx); err != nil {
		return err
	}
	d.view.printf("relay  restarted (pid %d) on the same store", d.secondPID)
	if err := demoWaitFor(ctx, demoPhaseTimeout, "phase 2 replies", func() bool { return d.bot.answered(all) == len(all) }); err != nil {
		return err
	}
	// Attempts the killed relay held stay leased until their lease ends;
	// then the restarted relay takes them over. Wait until the store is
	// settled (another reader of the same SQLite file, as an operator's
	// 'tgrelay updates' would be).
	st, err := openStore(ctx, d.dbPath, "", false)
	if err != nil {
		return err
	}
	defer st.Close()
	var last intake.Stats
	err = demoWaitFor(ctx, demoPhaseTimeout, "the store to settle", func() bool {
		s, err := st.Stats(ctx)
		if err != nil {
			return false
		}
		if live(s) != live(last) && live(s) > 0 {
			d.view.printf("store  %d updates leased by the killed relay, waiting for their leases to end", live(s))
		}
		last = s
		return live(s) == 0 && s.Unacknowledged == 0
	})
	return err
}

// live counts the rows still to be handled.
func live(s intake.Stats) int {
	return s.Count[intake.StatePending] + s.Count[intake.StateProcessing] + s.Count[intake.StateFailed]
}

// demoCheck is one line of the report.
type demoCheck struct {
	ok   bool
	text string
}

func (d *demo) report(ctx context.Context) error {
	st, err := openStore(ctx, d.dbPath, "", false)
	if err != nil {
		return fmt.Errorf("open the store for the report: %w", err)
	}
	defer st.Close()
	stats, err := st.Stats(ctx)
	if err != nil {
		return fmt.Errorf("store stats: %w", err)
	}
	rows, err := st.List(ctx, listAll(len(d.sent)))
	if err != nil {
		return fmt.Errorf("store list: %w", err)
	}
	journal, err := demoJournal(ctx, st.store, rows)
	if err != nil {
		return err
	}
	checks := d.checks(stats, rows, journal)
	fmt.Fprintln(d.view.w, "\nreport")
	failed := 0
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(d.view.w, "  %s  %s\n", mark, c.text)
	}
	if failed > 0 {
		fmt.Fprintf(d.view.w, "demo FAILED: %d of %d checks (relay log: %s)\n", failed, len(checks), d.relayLogPath)
		return errDemoFailed
	}
	fmt.Fprintf(d.view.w, "demo passed: %d checks in %.1fs\n", len(checks), time.Since(d.view.start).Seconds())
	return nil
}

// demoJournal reads the gateway's journal of every row's update.
func demoJournal(ctx context.Context, st intake.Store, rows []intake.Row) (map[int64][]intake.JournalEntry, error) {
	js, ok := st.(intake.JournalStore)
	if !ok {
		return nil, errors.New("the store keeps no journal of the gateway's calls")
	}
	out := make(map[int64][]intake.JournalEntry, len(rows))
	for _, r := range rows {
		es, err := js.Journal(ctx, r.UpdateID)
		if err != nil {
			return nil, fmt.Errorf("journal of update %d: %w", r.UpdateID, err)
		}
		out[r.UpdateID] = es
	}
	return out, nil
}

// listAll selects every row, with one spare to detect extra rows.
func listAll(n int) intake.ListQuery { return intake.ListQuery{Limit: n + 1} }
