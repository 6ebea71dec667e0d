package main

import (
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

// checks draws the report from the store's rows and stats, the sandbox's
// ledger and the example bot's memory.
func (d *demo) checks(stats intake.Stats, rows []intake.Row) []demoCheck {
	byID := make(map[int64]intake.Row, len(rows))
	for _, r := range rows {
		byID[r.UpdateID] = r
	}
	bot := d.bot.state()
	var checks []demoCheck
	add := func(ok bool, format string, args ...any) {
		checks = append(checks, demoCheck{ok: ok, text: fmt.Sprintf(format, args...)})
	}

	// 1. Every update the users made is in the store, once.
	missing := 0
	for _, m := range d.sent {
		if _, ok := byID[m.updateID]; !ok {
			missing++
		}
	}
	add(missing == 0 && len(rows) == len(d.sent),
		"recorded: %d user messages, %d rows in the store (%d missing)", len(d.sent), len(rows), missing)

	// 2. Nothing is left unfinished.
	live := live(stats)
	add(live == 0 && stats.Unacknowledged == 0,
		"settled: %d completed, %d abandoned; %d pending/processing/failed, %d unacknowledged exhaustions",
		stats.Count[intake.StateCompleted], stats.Count[intake.StateAbandoned], live, stats.Unacknowledged)

	// 3. Exactly one echo per message (the poison excepted), per the ledger.
	echoes, wrong, uncertain := 0, 0, 0
	for _, m := range d.sent {
		n := 0
		for _, msg := range d.sandbox.MessagesTo(m.chatID) {
			if msg.Text == demoEchoPrefix+m.text {
				n++
			}
		}
		echoes += n
		want := 1
		if m.updateID == d.poisonID {
			want = 0
		}
		if _, ok := bot.uncertain[m.updateID]; ok && n <= 1 {
			uncertain++ // accounted for: the bot knows it may have arrived
			continue
		}
		if n != want {
			wrong++
		}
	}
	repeats := len(d.sandbox.Repeats())
	add(wrong == 0 && repeats == 0,
		"replies: %d echo replies for %d messages (poison excepted), exactly one each; %d wrong, %d uncertain, %d chats got a text twice",
		echoes, len(d.sent)-1, wrong, uncertain, repeats)

	// 4. The flaky update was retried and completed.
	fr := byID[d.flakyID]
	add(fr.State == intake.StateCompleted && fr.Attempts == demoFlakyFailures+1 && len(bot.attempts[d.flakyID]) >= demoFlakyFailures+1,
		"retry: update %d answered 500 twice, completed on attempt %d (bot saw attempts %v)",
		d.flakyID, fr.Attempts, bot.attempts[d.flakyID])

	// 5. The poison update became an exhaustion, was delivered and acknowledged.
	pr := byID[d.poisonID]
	delivered := slices.ContainsFunc(bot.exhaustions, func(p forward.ExhaustionPayload) bool { return p.UpdateID == d.poisonID })
	add(pr.State == intake.StateAbandoned && !pr.Unacknowledged() && !pr.SettledAt.IsZero() && delivered && pr.Attempts == 1,
		"poison: update %d refused (400) on attempt %d, exhausted, delivered to the exhaustion endpoint (%v), acknowledged (%v)",
		d.poisonID, pr.Attempts, delivered, pr.State == intake.StateAbandoned && !pr.Unacknowledged())

	// 6. Nothing was lost across the kill.
	var phase2, done2 int
	for _, m := range d.sent {
		if m.phase != 2 {
			continue
		}
		phase2++
		if r, ok := byID[m.updateID]; ok && r.State == intake.StateCompleted {
			if _, replied := bot.replied[m.updateID]; replied {
				done2++
			}
		}
	}
	add(phase2 > 0 && done2 == phase2 && d.secondPID != 0 && d.killInFlight > 0,
		"crash: relay SIGKILLed (pid %d) with %d updates unanswered, %d more sent while down; after restart (pid %d) %d of %d completed and answered; %d re-deliveries answered without a second reply",
		d.firstPID, d.killInFlight, d.sentWhileDown, d.secondPID, done2, phase2, bot.again)

	// 7. The sandbox handed everything over.
	add(d.sandbox.PendingUpdates() == 0, "sandbox: %d updates left undelivered", d.sandbox.PendingUpdates())
	return checks
}
