package relay

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/throttle"
)

// DashboardConfig configures the web UI (package dashboard) a relay mounts
// at "/" on its admin listener: the relay's figures, its updates and
// exhaustions (with Acknowledge and Requeue), and its broadcasts. The zero
// value mounts nothing.
type DashboardConfig struct {
	// Enabled mounts the dashboard. It needs an admin listener
	// (Config.AdminListen or Config.AdminListener).
	Enabled bool
	// AdminToken, when set, is required of every dashboard request (a
	// sign-in form, or an "Authorization: Bearer" header). It is required
	// when the admin listener is not on a loopback address: New refuses
	// the configuration without it. At least
	// [dashboard.MinAdminTokenLen] bytes. It never appears in a page, a
	// URL or a log line.
	AdminToken string
	// ReadOnly hides the Acknowledge and Requeue buttons and refuses
	// every change.
	ReadOnly bool
	// BroadcastDir is the directory of the broadcast journals the
	// Broadcasts page shows (tgrelay broadcast's --state-dir). Empty shows
	// none.
	BroadcastDir string
	// RefreshInterval is how often open pages refresh themselves. Zero
	// means [dashboard.DefaultRefreshInterval].
	RefreshInterval time.Duration
	// TrustedProxies are the reverse proxies in front of the admin
	// listener whose X-Forwarded-Proto and X-Forwarded-For the dashboard
	// believes (see [dashboard.Config.TrustedProxies]). Empty trusts none.
	TrustedProxies []netip.Prefix
}

// fillDashboard checks the dashboard's settings against the admin
// listener.
func (c *Config) fillDashboard() error {
	d := c.Dashboard
	if !d.Enabled {
		return nil
	}
	addr := c.AdminListen
	if c.AdminListener != nil {
		addr = c.AdminListener.Addr().String()
	}
	if addr == "" {
		return badField("Dashboard.Enabled", "needs an admin listener: set AdminListen")
	}
	// A missing store is Store's error, reported last (see fill).
	if _, ok := c.Store.(intake.AdminStore); !ok && c.Store != nil {
		return badField("Dashboard.Enabled", "needs a store with an admin view (an intake.AdminStore), and %T is not one", c.Store)
	}
	if d.AdminToken != "" && len(d.AdminToken) < dashboard.MinAdminTokenLen {
		return badField("Dashboard.AdminToken", "is too short: want at least %d bytes (a long random string)", dashboard.MinAdminTokenLen)
	}
	if err := dashboard.CheckExposure(addr, d.AdminToken); err != nil {
		return &ConfigError{Pkg: "relay", Field: "Dashboard.AdminToken", Err: errors.New("is required: the admin listener is not on a loopback address, so the dashboard would be open to the network")}
	}
	return nil
}

// newDashboard builds the dashboard and its recorder, when enabled.
func (r *Relay) newDashboard() error {
	d := r.cfg.Dashboard
	if !d.Enabled {
		return nil
	}
	r.rec = dashboard.NewRecorder()
	h, err := dashboard.New(dashboard.Config{
		Store:           r.caps.admin,
		StoreName:       r.cfg.StoreName,
		Recorder:        r.rec,
		BroadcastDir:    d.BroadcastDir,
		AdminToken:      d.AdminToken,
		ReadOnly:        d.ReadOnly,
		Secrets:         r.cfg.secrets(),
		RefreshInterval: d.RefreshInterval,
		TrustedProxies:  d.TrustedProxies,
		Logger:          r.log,
	})
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	r.dash = h
	r.adminMux.Handle("/", h)
	if m := r.webhookMode(); m != hookowner.ModeWebhook {
		r.rec.SetWebhook(hookowner.Status{Mode: m}) // nothing to claim or check
	}
	return nil
}

// DashboardURL returns the dashboard's address on the admin listener, ""
// without a dashboard or before the admin listener listens.
func (r *Relay) DashboardURL() string {
	if r.dash == nil || r.AdminURL() == "" {
		return ""
	}
	return r.AdminURL() + "/"
}

// dashboardObserver feeds the dashboard's recorder from the relay's events.
type dashboardObserver struct{ rec *dashboard.Recorder }

func (o dashboardObserver) Observe(e Event) {
	switch e.Kind {
	case KindAccepted:
		o.rec.Add(dashboard.SeriesAccepted, 1)
	case KindForwarded:
		o.rec.Add(dashboard.SeriesForwarded, 1)
	case KindSettled:
		switch e.State {
		case intake.StateCompleted:
			o.rec.Add(dashboard.SeriesCompleted, 1)
		case intake.StateFailed:
			o.rec.Add(dashboard.SeriesRetried, 1)
		case intake.StateAbandoned:
			o.rec.Add(dashboard.SeriesExhausted, 1)
		}
	case KindExhausted:
		o.rec.Add(dashboard.SeriesExhausted, 1)
	case KindExpired:
		o.rec.Add(dashboard.SeriesExpired, 1)
	case KindLeaseLost:
		o.rec.LeaseLost()
	case KindGatewayCall:
		outcome := string(e.Call.Outcome)
		if e.Call.Replayed {
			outcome = "replayed"
		}
		o.rec.GatewaySend(outcome)
	case KindLimiter:
		if e.Limiter.Kind == throttle.EventTooManyRequests {
			o.rec.GatewayPause(e.Limiter.RetryAfter)
		}
	}
}
