package dashboard

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// pageNames are the page templates; each defines "content" for the layout.
var pageNames = []string{"overview", "updates", "update", "confirm", "result", "exhaustions", "broadcasts", "broadcast", "error", "login",
	"replies", "processes", "bulk", "bulkresult"}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(templateFuncs).ParseFS(templateFS,
			"templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

var templateFuncs = template.FuncMap{
	"num":     num,
	"rate":    fmtRate,
	"pct":     func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"when":    when,
	"ago":     ago,
	"dur":     func(d time.Duration) string { return roundDur(d).String() },
	"short":   func(s string) string { return cut(s, 8, "") },
	"oneline": func(s string, n int) string { return cut(strings.Join(strings.Fields(s), " "), n, "…") },
	"add":     func(a, b int) int { return a + b },
	"dict":    dict,
	"list":    func(v ...any) []any { return v },
	"stateClass": func(s intake.State) string {
		return "state-" + string(s)
	},
	// rowState names a row's state: "expired" for a row that ended
	// expired, its State otherwise (see intake.Row.StateName).
	"rowState": func(r intake.Row) string { return r.StateName() },
}

// num prints an integer with thousands separators.
func num(v any) string {
	var s string
	switch n := v.(type) {
	case int:
		s = strconv.Itoa(n)
	case int64:
		s = strconv.FormatInt(n, 10)
	case uint64:
		s = strconv.FormatUint(n, 10)
	default:
		return fmt.Sprint(v)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// when prints a time in UTC to the second, "—" for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// ago prints how long before now t was, "—" for the zero time.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + roundDur(-d).String()
	}
	return roundDur(d).String() + " ago"
}

// roundDur rounds d to what a person reads: whole seconds, or whole
// minutes past an hour.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Second:
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// cut shortens s to n runes, ending with tail when it cut.
func cut(s string, n int, tail string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + tail
}

// dict builds a map from alternating keys and values, to pass several
// values to a sub-template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}
