package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// checkApp checks that the app's endpoints accept connections.
func (d *doctor) checkApp(ctx context.Context) {
	const check = "app"
	if d.o.forwardURL == "" {
		d.fail(check, "no --forward: serve has nowhere to send the updates", "set TGRELAY_FORWARD to your bot's webhook endpoint, such as http://127.0.0.1:3000/telegram")
		return
	}
	d.dialEndpoint(ctx, check, "--forward", d.o.forwardURL)
	if d.o.exhaustionURL != "" {
		d.dialEndpoint(ctx, check, "--exhaustion-forward", d.o.exhaustionURL)
	}
}

// dialEndpoint connects to an http(s) URL's host and port, without sending
// a request (a request would be taken for an update).
func (d *doctor) dialEndpoint(ctx context.Context, check, flagName, raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		d.fail(check, flagName+" is not an http or https URL", "fix "+flagName)
		return
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	pctx, cancel := d.probe(ctx)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(pctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		d.fail(check, fmt.Sprintf("%s (host %s) does not accept connections: %s", flagName, u.Host, dialCause(err)),
			"start the bot's app, or fix "+flagName+"; meanwhile serve stores the updates and retries them")
		return
	}
	_ = conn.Close()
	d.ok(check, fmt.Sprintf("%s (host %s) accepts connections", flagName, u.Host))
}

// checkGateway asks the gateway for getMe, as the app would.
func (d *doctor) checkGateway(ctx context.Context) {
	const check = "gateway"
	switch {
	case d.o.gatewayListen == "":
		d.skip(check, "off (no --gateway-listen)")
		return
	case d.o.token == "":
		d.skip(check, "not checked without a token")
		return
	}
	base := d.o.gatewayPublicURL
	if base == "" {
		host, port, err := net.SplitHostPort(d.o.gatewayListen)
		if err != nil {
			d.fail(check, "--gateway-listen is not host:port", "fix --gateway-listen")
			return
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	pctx, cancel := d.probe(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, strings.TrimRight(base, "/")+"/bot"+d.o.token+"/getMe", nil)
	if err != nil {
		d.fail(check, "--gateway-public-url is not a URL", "fix --gateway-public-url")
		return
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, CheckRedirect: botapi.NoRedirects}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		d.fail(check, fmt.Sprintf("the gateway (%s) does not answer: %s", hostOnly(base), dialCause(err)),
			"start serve with this environment (its --gateway-listen), or fix --gateway-public-url")
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	var env struct {
		OK     bool `json:"ok"`
		Result struct {
			Username string `json:"username"`
		} `json:"result"`
		Description string `json:"description"`
	}
	_ = json.Unmarshal(body, &env)
	if resp.StatusCode != http.StatusOK || !env.OK {
		d.fail(check, fmt.Sprintf("the gateway (%s) answered getMe %d %s", hostOnly(base), resp.StatusCode, env.Description),
			"see the token check, and serve's log for the gateway")
		return
	}
	d.ok(check, fmt.Sprintf("the gateway (%s) answers getMe (@%s)", hostOnly(base), env.Result.Username))
}

// versioned is a store that reports its schema version.
type versioned interface {
	SchemaVersion(ctx context.Context) (recorded, latest int, err error)
}

// checkStore opens --db without creating or migrating anything and checks
// it.
func (d *doctor) checkStore(ctx context.Context) {
	if isPostgresURL(d.o.db) {
		d.checkPostgres(ctx)
		return
	}
	d.checkSQLite(ctx)
}

func (d *doctor) checkSQLite(ctx context.Context) {
	const check = "store"
	if d.o.db == "" || strings.Contains(d.o.db, "://") {
		d.fail(check, "--db is neither a SQLite file path nor a postgres:// URL", "fix --db (TGRELAY_DB)")
		return
	}
	if err := refuseKeywordDSN(d.o.db); err != nil {
		ue, _ := errors.AsType[*usageError](err)
		d.fail(check, ue.msg, "fix --db (TGRELAY_DB): "+ue.hint)
		return
	}
	path, _ := filepath.Abs(d.o.db)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		d.fail(check, "no database at "+path,
			"start serve once (it creates it), or give doctor serve's --db (TGRELAY_DB; a relative path is relative to serve's working directory)")
		return
	}
	writable := true
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err != nil {
		writable = false
		d.fail(check, fmt.Sprintf("%s is not writable by this user: %v", path, errors.Unwrap(err)),
			"run doctor as serve's user; give that user the file and its directory (chown)")
	} else {
		_ = f.Close()
	}
	if tmp, err := os.CreateTemp(filepath.Dir(path), ".tgrelay-doctor-*"); err != nil {
		writable = false
		d.fail(check, fmt.Sprintf("the directory %s is not writable by this user: SQLite creates its -wal and -shm files there", filepath.Dir(path)),
			"run doctor as serve's user; give that user the directory (chown)")
	} else {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	st, err := sqlitestore.Open(octx, path, sqlitestore.Config{Table: d.o.table, MustExist: true})
	if err != nil {
		if errors.Is(err, sqlitestore.ErrNotMigrated) {
			d.fail(check, "the update table is missing or behind this tgrelay's schema: "+err.Error(),
				"start this version of serve once: it creates or migrates the table")
			return
		}
		d.fail(check, "the database does not open: "+err.Error(), "check that "+path+" is a tgrelay SQLite database")
		return
	}
	defer st.Close()
	d.schema(ctx, st, "SQLite "+path)
	if writable {
		if err := st.Health(ctx); err != nil {
			d.fail(check, "the database is not healthy: "+err.Error(), "check the file and its disk")
			return
		}
		d.ok(check, "the database file and its directory are writable by this user")
	}
}

// schema reports the store's schema version.
func (d *doctor) schema(ctx context.Context, st versioned, what string) {
	const check = "store"
	v, latest, err := st.SchemaVersion(ctx)
	switch {
	case err != nil:
		d.fail(check, "the schema version cannot be read: "+err.Error(), "check the database")
	case v > latest:
		d.warn(check, fmt.Sprintf("%s: schema version %d, newer than this tgrelay's %d (a newer tgrelay migrated it)", what, v, latest),
			"run doctor (and serve) from the newer tgrelay")
	default:
		d.ok(check, fmt.Sprintf("%s: schema version %d, this tgrelay's", what, v))
	}
}

func (d *doctor) checkPostgres(ctx context.Context) {
	const check = "store"
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	pool, err := pgxpool.New(octx, d.o.db)
	if err != nil {
		d.fail(check, "the --db URL does not parse as a PostgreSQL connection string", "fix TGRELAY_DB")
		return
	}
	defer pool.Close()
	st, err := pgstore.New(octx, pool, pgstore.Config{Table: d.o.table, NoCreate: true, MaxClockSkew: -1})
	switch {
	case errors.Is(err, pgstore.ErrNoTable):
		d.fail(check, "PostgreSQL has no update table yet", "start serve once (it creates it), or apply pgstore.Schema with your migration tool")
		return
	case errors.Is(err, pgstore.ErrNotMigrated):
		d.fail(check, "the update table is behind this tgrelay's schema: "+err.Error(), "start this version of serve once (it migrates), or apply the missing pgstore.Migrations")
		return
	case err != nil:
		d.fail(check, "PostgreSQL does not answer: "+err.Error(), "check that the server runs and TGRELAY_DB's host, port, user and password")
		return
	}
	d.schema(octx, st, "PostgreSQL")
	if err := st.Health(octx); err != nil {
		what := "PostgreSQL is not healthy: " + err.Error()
		if errors.Is(err, pgstore.ErrReadOnly) {
			what = "PostgreSQL accepts only read-only transactions (a standby, or default_transaction_read_only)"
		}
		d.fail(check, what, "point TGRELAY_DB at the primary, writable server")
	} else {
		d.ok(check, "PostgreSQL accepts writes")
	}
	skew, within, err := st.ClockSkew(octx)
	if err != nil {
		d.fail(check, "the database's clock cannot be read: "+err.Error(), "check the database")
		return
	}
	status, what, fix := judgeClockSkew(skew, within, d.o.maxClockSkew)
	d.add(check, status, what, fix)
	if intake.ChatOrder(d.o.chatOrder) == intake.ChatOrderStrict {
		d.chatIndex(octx, st)
	}
}

// chatIndex checks, for --chat-order strict on PostgreSQL, that the chat
// index strict order reads is built or that serve's role may build it on
// its first strict call: only the table's owner may.
func (d *doctor) chatIndex(ctx context.Context, st *pgstore.Store) {
	const check = "store"
	built, mayBuild, err := st.ChatIndexState(ctx)
	switch {
	case err != nil:
		d.fail(check, "the chat index's state cannot be read: "+err.Error(), "check the database")
	case built:
		d.ok(check, "--chat-order strict: the chat index is built")
	case mayBuild:
		d.ok(check, "--chat-order strict: the first strict call builds the chat index (it reads the table once, holding its writes until done)")
	default:
		stmt, _ := pgstore.ChatIndexSQL(st.Table())
		d.fail(check, "--chat-order strict: the chat index is not built, and this role may not build it (it does not own the table): every strict call fails",
			"have the table's owner run: "+strings.Join(strings.Fields(stmt), " "))
	}
}

// judgeClockSkew turns a measured skew (this host minus the database) into
// a finding against --max-clock-skew (bound; zero: its default; negative:
// no check).
func judgeClockSkew(skew, within, bound time.Duration) (status, what, fix string) {
	if bound == 0 {
		bound = pgstore.DefaultMaxClockSkew
	}
	dir := "ahead of"
	if skew < 0 {
		dir = "behind"
	}
	measured := fmt.Sprintf("this host's clock is %v %s the database's (±%v)", skew.Abs().Round(time.Millisecond), dir, within.Round(time.Millisecond))
	if skew.Abs() < time.Millisecond {
		measured = fmt.Sprintf("this host's clock agrees with the database's within a millisecond (±%v)", within.Round(time.Microsecond))
	}
	switch {
	case bound < 0:
		return statusOK, measured + "; --max-clock-skew is off", ""
	case skew.Abs() > bound:
		return statusFail, measured + fmt.Sprintf(", beyond --max-clock-skew %v: serve refuses to claim or beat", bound),
			"synchronise the clocks with NTP (timedatectl set-ntp true, or chrony) on this host and the database's"
	case skew.Abs() > bound/2:
		return statusWarn, measured + fmt.Sprintf(", more than half of --max-clock-skew %v", bound),
			"synchronise the clocks with NTP before serve starts refusing claims"
	default:
		return statusOK, measured + fmt.Sprintf(", within --max-clock-skew %v", bound), ""
	}
}
