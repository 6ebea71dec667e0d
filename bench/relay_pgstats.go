package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// pgStatements reports, with relay's -pg-statements, what each
// PostgreSQL variant's statements cost the server per update, from
// pg_stat_statements: which statement the server's CPU goes to, where the
// CPU table gives only its total. The cluster preloads the module; its
// counts are reset after the warm-up, so they cover the measured rounds.
// A nil *pgStatements does nothing.
type pgStatements struct {
	cluster *pgtest.Cluster
	dbs     map[string]string // database name → variant
}

// pgStatementsTop is how many statements a variant's report lists.
const pgStatementsTop = 6

// settings returns the cluster settings pg_stat_statements needs.
func (p *pgStatements) settings() []string {
	if p == nil {
		return nil
	}
	return []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}
}

// attach makes the view readable on c's maintenance database.
func (p *pgStatements) attach(ctx context.Context, c *pgtest.Cluster) error {
	if p == nil {
		return nil
	}
	p.cluster, p.dbs = c, map[string]string{}
	return p.exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
}

// name records that variant runs on the database of dbURL.
func (p *pgStatements) name(variant, dbURL string) {
	if p == nil || p.cluster == nil {
		return
	}
	if u, err := url.Parse(dbURL); err == nil {
		p.dbs[strings.TrimPrefix(u.Path, "/")] = variant
	}
}

// reset starts the counts afresh.
func (p *pgStatements) reset(ctx context.Context) error {
	if p == nil || p.cluster == nil {
		return nil
	}
	return p.exec(ctx, "SELECT pg_stat_statements_reset()")
}

func (p *pgStatements) exec(ctx context.Context, sql string) error {
	c, err := pgx.Connect(ctx, p.cluster.AdminURL())
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	return nil
}

// pgStatement is one statement's counts in one database.
type pgStatement struct {
	calls int64
	ms    float64 // total execution time
	text  string
}

// report writes, for each variant, its statements' execution time per
// update (updates is how many each variant handled since the reset): the
// total, and the costliest statements with their calls per update.
func (p *pgStatements) report(ctx context.Context, out io.Writer, updates int) error {
	if p == nil || p.cluster == nil || updates <= 0 {
		return nil
	}
	c, err := pgx.Connect(ctx, p.cluster.AdminURL())
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT d.datname, s.calls, s.total_exec_time, s.query
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid`)
	if err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	byVariant := map[string][]pgStatement{}
	for rows.Next() {
		var db string
		var st pgStatement
		if err := rows.Scan(&db, &st.calls, &st.ms, &st.text); err != nil {
			return fmt.Errorf("pg_stat_statements: %w", err)
		}
		if v, ok := p.dbs[db]; ok {
			byVariant[v] = append(byVariant[v], st)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	names := make([]string, 0, len(byVariant))
	for v := range byVariant {
		names = append(names, v)
	}
	sort.Strings(names)
	n := float64(updates)
	fmt.Fprintf(out, "\nPostgreSQL statements per update (pg_stat_statements, execution time, the measured rounds' %d updates per variant)\n", updates)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, v := range names {
		sts := byVariant[v]
		sort.Slice(sts, func(i, j int) bool { return sts[i].ms > sts[j].ms })
		total := 0.0
		for _, st := range sts {
			total += st.ms
		}
		fmt.Fprintf(tw, "%s\t%.1f µs\tall statements\t\n", v, total*1000/n)
		for _, st := range sts[:min(len(sts), pgStatementsTop)] {
			text := strings.Join(strings.Fields(st.text), " ") // one line
			if r := []rune(text); len(r) > 90 {
				text = string(r[:90]) + "…"
			}
			fmt.Fprintf(tw, "\t%.1f µs\t%.2f calls\t%s\n", st.ms*1000/n, float64(st.calls)/n, text)
		}
	}
	return tw.Flush()
}
