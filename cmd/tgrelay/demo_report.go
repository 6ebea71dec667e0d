package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// checks draws the report from the store's rows and stats, the gateway's
// journal, the answers the example bot got from the gateway and the
// sandbox's ledger. Every check can fail: each compares what the product
// promises with what the ledger and the store hold.
func (d *demo) checks(stats intake.Stats, rows []intake.Row, journal map[int64][]intake.JournalEntry) []demoCheck {
	byID := make(map[int64]intake.Row, len(rows))
	for _, r := range rows {
		byID[r.UpdateID] = r
	}
	bot := d.bot.state()
	ledger := d.sandbox.Messages()
	inLedger := func(chat int64, text string) int {
		n := 0
		for _, m := range ledger {
			if m.ChatID == chat && m.Text == text {
				n++
			}
		}
		return n
	}
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

	// 3. One echo per message (the poison and the burst excepted), per the
	// ledger: exactly once where the gateway answered the reply, at most
	// once where it answered unknown, and only where the journal shows why.
	var echoed, exactly, atMostOnce, arrived, wrong, unexplained int
	for _, m := range d.sent {
		if m.updateID == d.poisonID || m.updateID == d.burstID {
			continue
		}
		echoed++
		n := inLedger(m.chatID, demoEchoPrefix+m.text)
		last, ok := bot.updates[m.updateID].lastCall()
		switch {
		case ok && last.sent():
			if n == 1 {
				exactly++
			} else {
				wrong++
			}
		case ok && last.unknown():
			atMostOnce++
			arrived += n
			if n > 1 {
				wrong++
			}
			if !journaledUncertain(journal[m.updateID]) {
				unexplained++
			}
		default:
			wrong++ // no known outcome: the check cannot hold
		}
	}
	repeats := len(d.sandbox.Repeats())
	add(wrong == 0 && unexplained == 0 && repeats == 0 && exactly+atMostOnce == echoed,
		"replies: %d of %d messages (poison and burst excepted) got their echo exactly once; %d at most once (unknown since the SIGKILL, never resent: %d arrived, %d lost); %d wrong, %d unexplained, %d chats got a text twice",
		exactly, echoed, atMostOnce, arrived, atMostOnce-arrived, wrong, unexplained, repeats)

	// 4. The flaky update replied, failed twice, and its retries' identical
	// replies were answered from the journal: one message in the chat.
	fr := byID[d.flakyID]
	fu := bot.updates[d.flakyID]
	flakyText, flakyChat := d.textOf(d.flakyID)
	flakyEchoes := inLedger(flakyChat, demoEchoPrefix+flakyText)
	replayed := 0
	for _, c := range fu.calls {
		if c.attempt > 1 && c.sent() && c.replayed {
			replayed++
		}
	}
	once := "exactly once"
	if flakyEchoes != 1 {
		once = fmt.Sprintf("%d times", flakyEchoes)
	}
	add(fr.State == intake.StateCompleted && fr.Attempts == demoFlakyFailures+1 && len(fu.attempts) == demoFlakyFailures+1 &&
		flakyEchoes == 1 && replayed == demoFlakyFailures,
		"retry: update %d replied, then answered 500 twice; completed on attempt %d (bot saw attempts %v); its reply reached the chat %s (%d retries answered from the journal)",
		d.flakyID, fr.Attempts, fu.attempts, once, replayed)

	// 5. The burst to one chat: more replies than Telegram lets a chat
	// receive at once, none answered 429 at the app, all in the ledger.
	bu := bot.updates[d.burstID]
	var ok200, got429 int
	var took time.Duration
	final := -1 // the burst's last attempt
	if len(bu.attempts) > 0 {
		final = bu.attempts[len(bu.attempts)-1]
	}
	for _, c := range bu.calls {
		if c.status == http.StatusTooManyRequests {
			got429++
		}
		if c.attempt == final {
			took += c.took
			if c.sent() {
				ok200++
			}
		}
	}
	burstText, burstChat := d.textOf(d.burstID)
	burstInLedger := 0
	for k := 1; k <= demoBurstReplies; k++ {
		if inLedger(burstChat, demoBurstText(k, burstText)) == 1 {
			burstInLedger++
		}
	}
	add(byID[d.burstID].State == intake.StateCompleted && ok200 == demoBurstReplies && got429 == 0 && burstInLedger == demoBurstReplies,
		"burst: %d replies in a row to one chat in %.1fs (Telegram allows %d per %v): %d answered 200, %d 429s at the app; the ledger holds %d of them",
		demoBurstReplies, took.Seconds(), throttle.DefaultChatCount, throttle.DefaultChatPer, ok200, got429, burstInLedger)

	// 6. A stale attempt's send was refused and nothing reached the chat.
	lateStatus, lateOutcome, lateArrived := 0, "none", 0
	if bot.late != nil {
		lateStatus, lateOutcome = bot.late.status, bot.late.outcome
		lateArrived = inLedger(flakyChat, bot.late.text)
	}
	add(bot.late != nil && lateStatus == gateway.StatusStale && lateOutcome == string(wire.OutcomeStale) && lateArrived == 0,
		"stale: a late reply from attempt 1 of update %d (retried and completed since) was refused %d (%s); %d reached the chat",
		d.flakyID, lateStatus, lateOutcome, lateArrived)

	// 7. The poison update became an exhaustion, was delivered and acknowledged.
	pr := byID[d.poisonID]
	delivered := slices.ContainsFunc(bot.exhaustions, func(p forward.ExhaustionPayload) bool { return p.UpdateID == d.poisonID })
	add(pr.State == intake.StateAbandoned && !pr.Unacknowledged() && !pr.SettledAt.IsZero() && delivered && pr.Attempts == 1,
		"poison: update %d refused (400) on attempt %d, exhausted, delivered to the exhaustion endpoint (%v), acknowledged (%v)",
		d.poisonID, pr.Attempts, delivered, pr.State == intake.StateAbandoned && !pr.Unacknowledged())

	// 8. Nothing was lost across the kill, and nothing was sent twice.
	var phase2, done2, replays int
	for _, m := range d.sent {
		if m.phase != 2 {
			continue
		}
		phase2++
		u := bot.updates[m.updateID]
		if r, ok := byID[m.updateID]; ok && r.State == intake.StateCompleted && u.status == http.StatusOK {
			done2++
		}
		for _, c := range u.calls {
			if c.replayed {
				replays++
			}
		}
	}
	inFlightJournaled := journaledUncertain(journal[d.inFlightID])
	add(phase2 > 0 && done2 == phase2 && d.secondPID != 0 && d.killInFlight > 0 && d.inFlightID != 0 && inFlightJournaled,
		"crash: relay SIGKILLed (pid %d) while update %d's reply was in flight (journaled without an outcome: %v), %d updates unanswered, %d more sent while down; after restart (pid %d) %d of %d completed and answered; replies repeated by a retry and answered from the journal: %d, none sent twice",
		d.firstPID, d.inFlightID, inFlightJournaled, d.killInFlight, d.sentWhileDown, d.secondPID, done2, phase2, replays)

	// 9. The sandbox handed everything over.
	add(d.sandbox.PendingUpdates() == 0, "sandbox: %d updates left undelivered", d.sandbox.PendingUpdates())
	return checks
}

// textOf returns the text and chat of a message the demo sent.
func (d *demo) textOf(updateID int64) (string, int64) {
	for _, m := range d.sent {
		if m.updateID == updateID {
			return m.text, m.chatID
		}
	}
	return "", 0
}

// journaledUncertain reports whether an update's journal holds a
// sendMessage whose outcome is not known: an intent without an outcome
// (the relay died between them) or an unknown one. That is the only
// reason the gateway answers a reply unknown.
func journaledUncertain(es []intake.JournalEntry) bool {
	return slices.ContainsFunc(es, func(e intake.JournalEntry) bool {
		return strings.EqualFold(e.Method, "sendMessage") && (e.Outcome == intake.CallPending || e.Outcome == intake.CallUnknown)
	})
}
