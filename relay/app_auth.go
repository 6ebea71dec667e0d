package relay

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
)

// MaxAppAuthHoldDelay caps the wait between two forwards of an update the
// app refuses with 401 or 403 (see [AppStatus]).
const MaxAppAuthHoldDelay = time.Minute

// AppStatus is the app's side of the relay as its answers show it.
//
// An app that answers an update forward 401 or 403 refused the forward's
// credentials: a configuration problem (its framework's secret check and
// Config.Forward.AppSecretToken disagree), not a bad update. The relay
// then holds the update within its attempt: it forwards it again after
// Config.BackoffBase, doubling up to [MaxAppAuthHoldDelay], for as long
// as the app refuses, so the refusals spend none of its attempts and never
// make it an exhaustion. Each refusal is logged as an error naming the
// setting, and reported as a [KindAppAuthRefused] event. Held updates keep
// their chats' later updates waiting (they would be refused too) and
// occupy forwarding slots (Config.MaxConcurrent), so the app is not
// flooded. A stop ends the holds at once, which spends those attempts like
// any failure, except an update on its last attempt: that one stays held
// until the drain deadline cancels it, unsettled, to be taken over
// later (with a heartbeat store, as a crash, which spends no attempt).
type AppStatus struct {
	// AuthFailing reports that the app's last answer to a forward was 401
	// or 403.
	AuthFailing bool
	// AuthCode is that status code, zero while not AuthFailing.
	AuthCode int
	// AuthFailingSince is when the app began refusing: the first refusal
	// since it last accepted a forward. Zero while not AuthFailing.
	AuthFailingSince time.Time
	// Held is how many updates are held now because the app refused them.
	Held int
	// Refusals counts the 401 and 403 answers since the relay started.
	Refusals int64
}

// holdDelay is the wait before forward n+1 of an update refused n times:
// BackoffBase doubled per refusal, capped at MaxAppAuthHoldDelay.
func (r *Relay) holdDelay(refusals int) time.Duration {
	b := backoff.Capped{Base: min(r.cfg.BackoffBase, MaxAppAuthHoldDelay), Factor: 2, Max: MaxAppAuthHoldDelay}
	return b.Delay(refusals)
}

// setting names a Config field as the user set it (see
// Config.SettingNameFunc).
func (r *Relay) setting(field string) string {
	if f := r.cfg.SettingNameFunc; f != nil {
		if name := f(field); name != "" {
			return name
		}
	}
	return field
}

// forwardHeld forwards one attempt and, while the app refuses it with 401
// or 403, forwards it again after holdDelay, within the same attempt (see
// AppStatus). It returns the last forward's outcome.
func (r *Relay) forwardHeld(ctx context.Context, u intake.Update, a intake.Attempt) error {
	// A stop ends the hold at once, except on the last attempt, where the
	// failure would exhaust the update: that hold lasts until the drain
	// deadline cancels ctx.
	stopping := r.stopping
	if a.Attempt >= cmp.Or(r.cfg.Intake.MaxAttempts, intake.DefaultMaxAttempts) {
		stopping = nil
	}
	held := false
	defer func() {
		if held {
			r.mu.Lock()
			r.app.Held--
			r.publishAppLocked()
			r.mu.Unlock()
		}
	}()
	for refusals := 1; ; refusals++ {
		err := r.timedForward(ctx, u, a)
		ae, refused := errors.AsType[*forward.AuthError](err)
		if !refused {
			r.appAccepted(a.Identity)
			return err
		}
		wait := r.holdDelay(refusals)
		held = r.appRefused(a.Identity, ae, held, wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-stopping:
			t.Stop()
			return err
		}
	}
}

// appRefused records a 401 or 403 of the app for id, held already or not,
// logs it and reports it. It returns true: the update is held now.
func (r *Relay) appRefused(id intake.Identity, ae *forward.AuthError, held bool, wait time.Duration) bool {
	now := r.now()
	r.mu.Lock()
	if !held {
		r.app.Held++
	}
	if !r.app.AuthFailing {
		r.app.AuthFailingSince = now
	}
	r.app.AuthFailing, r.app.AuthCode = true, ae.Code
	r.app.Refusals++
	n := r.app.Held
	r.publishAppLocked()
	r.mu.Unlock()
	hint := "the forward sends no X-Telegram-Bot-Api-Secret-Token: set " + r.setting("Forward.AppSecretToken") + " to the secret the app's framework checks"
	if ae.SecretSent {
		hint = "the app refuses the X-Telegram-Bot-Api-Secret-Token the forward sends: make " + r.setting("Forward.AppSecretToken") + " and the app's secret check agree"
	}
	r.log.Error("relay: the app refuses forwards (401/403): a configuration problem, not a bad update; the update is held and forwarded again, its attempts unspent",
		"update_id", id.UpdateID, "attempt", id.Attempt, "status", ae.Code, "held_updates", n, "retry_in", wait, "hint", hint)
	r.emit(Event{Kind: KindAppAuthRefused, ID: id, Err: ae, Duration: wait, Count: n})
	return true
}

// appAccepted clears the alert once the app answers a forward with
// anything but 401 or 403.
func (r *Relay) appAccepted(id intake.Identity) {
	r.mu.Lock()
	was := r.app.AuthFailing
	since := r.app.AuthFailingSince
	r.app.AuthFailing, r.app.AuthCode, r.app.AuthFailingSince = false, 0, time.Time{}
	if was {
		r.publishAppLocked()
	}
	r.mu.Unlock()
	if !was {
		return
	}
	r.log.Info("relay: the app accepts forwards again", "update_id", id.UpdateID, "refused_for", r.now().Sub(since).Round(time.Millisecond))
	r.emit(Event{Kind: KindAppAuthAccepted, ID: id})
}

// publishAppLocked shows the app's side on the dashboard, if any. The
// caller holds r.mu.
func (r *Relay) publishAppLocked() {
	if r.rec == nil {
		return
	}
	a := r.app
	r.rec.SetApp(dashboard.AppStatus{AuthFailing: a.AuthFailing, AuthCode: a.AuthCode, Since: a.AuthFailingSince, Held: a.Held, Refusals: a.Refusals})
}

// App returns the app's side as its answers show it (see [AppStatus]).
func (r *Relay) App() AppStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.app
}
