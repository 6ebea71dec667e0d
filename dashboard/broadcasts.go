package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/tgrelay/tgrelay/broadcast"
)

// bar is a broadcast's progress as stacked segments, in percent of the
// audience.
type bar struct {
	Segments []segment
	Done     float64 // percent with a final outcome
}

type segment struct {
	Class string
	Label string
	N     int
	X, W  float64 // percent
}

func newBar(rep broadcast.Report) bar {
	var b bar
	if rep.Total == 0 {
		return b
	}
	x := 0.0
	for _, s := range []segment{
		{Class: "delivered", Label: "delivered", N: rep.Delivered},
		{Class: "failed", Label: "failed", N: rep.Failed},
		{Class: "uncertain", Label: "uncertain", N: rep.Uncertain},
		{Class: "unreachable", Label: "unreachable", N: rep.Unreachable},
	} {
		if s.N == 0 {
			continue
		}
		s.X, s.W = x, float64(s.N)*100/float64(rep.Total)
		x += s.W
		b.Segments = append(b.Segments, s)
	}
	b.Done = float64(rep.Total-rep.Pending) * 100 / float64(rep.Total)
	return b
}

// journalView is one broadcast as the Broadcasts pages show it.
type journalView struct {
	Name   string
	Status *broadcast.Status
	Bar    bar
	Err    string // why it could not be read
	// Progress is the measured rate and ETA of a running broadcast.
	Progress *progress
}

type broadcastsData struct {
	Dir        bool // a directory is configured
	Journals   []journalView
	More       int // journals beyond MaxBroadcasts, not read
	DirMissing bool
}

// broadcastNames lists the broadcast names in dir, sorted, at most max,
// and how many more there are.
func broadcastNames(dir string, max int) ([]string, int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && broadcast.ValidName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) > max {
		return names[:max], len(names) - max, nil
	}
	return names, 0, nil
}

func (h *Handler) inspect(name string) journalView {
	v := journalView{Name: name}
	st, err := broadcast.Inspect(h.cfg.BroadcastDir, name)
	switch {
	case errors.Is(err, broadcast.ErrNotFound):
		v.Err = "no audience snapshot yet: no run got as far as starting"
	case err != nil:
		h.log.Warn("dashboard: broadcast journal unreadable", "name", name, "err", h.redact(err.Error()))
		v.Err = "unreadable: " + h.redact(err.Error())
	default:
		v.Status, v.Bar = st, newBar(st.Report)
		if st.Running {
			p := h.rates.observe(name, time.Now(), st.Total-st.Pending, st.Pending)
			v.Progress = &p
		} else {
			h.rates.forget(name)
		}
	}
	return v
}

// broadcasts lists every broadcast journal in Config.BroadcastDir.
func (h *Handler) broadcasts(w http.ResponseWriter, r *http.Request) {
	d := broadcastsData{Dir: h.cfg.BroadcastDir != ""}
	if d.Dir {
		names, more, err := broadcastNames(h.cfg.BroadcastDir, MaxBroadcasts)
		switch {
		case errors.Is(err, os.ErrNotExist):
			d.DirMissing = true
		case err != nil:
			h.log.Warn("dashboard: broadcast directory unreadable", "err", h.redact(err.Error()))
			h.fail(w, r, http.StatusServiceUnavailable, "Broadcasts unavailable", "The broadcast directory could not be read. The relay's log has the details.")
			return
		}
		d.More = more
		for _, n := range names {
			d.Journals = append(d.Journals, h.inspect(n))
		}
	}
	h.render(w, r, http.StatusOK, "broadcasts", page{Title: "Broadcasts", Nav: "broadcasts", Live: true, Data: d})
}

// recipientList is one bounded list of recipients.
type recipientList struct {
	Title  string
	Class  string
	Note   string
	Shown  []string
	Hidden int
}

func newRecipientList(title, class, note string, rs []broadcast.Recipient) recipientList {
	l := recipientList{Title: title, Class: class, Note: note}
	for i, rc := range rs {
		if i == MaxListedRecipients {
			l.Hidden = len(rs) - i
			break
		}
		l.Shown = append(l.Shown, rc.String())
	}
	return l
}

type broadcastData struct {
	Journal journalView
	Lists   []recipientList
}

// broadcast shows one broadcast with its uncertain, failed and unreachable
// recipients.
func (h *Handler) broadcast(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if h.cfg.BroadcastDir == "" || !broadcast.ValidName(name) {
		h.fail(w, r, http.StatusNotFound, "Not found", "There is no such broadcast.")
		return
	}
	d := broadcastData{Journal: h.inspect(name)}
	if d.Journal.Status == nil {
		h.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("Broadcast %s: %s.", name, d.Journal.Err))
		return
	}
	st := d.Journal.Status
	d.Lists = []recipientList{
		newRecipientList("Uncertain", "uncertain", "They may or may not have the message; they are never sent again automatically. Check them by hand.", st.Uncertain),
		newRecipientList("Failed", "failed", "Telegram refused the send.", st.Failed),
		newRecipientList("Unreachable", "unreachable", "Blocked the bot, deleted, or the chat is gone.", st.Unreachable),
	}
	h.render(w, r, http.StatusOK, "broadcast", page{Title: "Broadcast " + name, Nav: "broadcasts", Live: true, Data: d})
}
