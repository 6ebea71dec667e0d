package pgstore

import (
	"context"
	"time"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// SchemaVersion returns the schema version recorded for the store's table
// (0 when none is) and the latest version this store knows, for
// diagnostics such as `tgrelay doctor`. A recorded version above latest
// means a newer tgrelay migrated the table. It only reads and takes no
// lock.
func (s *Store) SchemaVersion(ctx context.Context) (recorded, latest int, err error) {
	ms, err := Migrations(s.table)
	if err != nil {
		return 0, 0, err
	}
	v, err := schemaVersion(ctx, s.pool, s.table)
	if err != nil {
		return 0, 0, s.fail("read schema version", err)
	}
	return v, sqlschema.Latest(ms), nil
}

// ClockSkew measures this host's clock minus the database's (positive when
// this host runs ahead), the quantity [Config.MaxClockSkew] bounds. It reads
// the database's clock_timestamp() on a connection already in hand and
// compares it with the midpoint of this host's clock around the query; of
// three such readings it keeps the one with the shortest round trip. The
// result is off by at most half that round trip, which it returns as
// uncertainty. It changes nothing.
func (s *Store) ClockSkew(ctx context.Context) (skew, uncertainty time.Duration, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, 0, s.fail("clock skew", err)
	}
	defer conn.Release()
	const readings = 3
	for i := range readings {
		var dbMicros int64
		before := s.clock()
		err = conn.QueryRow(ctx, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint").Scan(&dbMicros)
		after := s.clock()
		if err != nil {
			return 0, 0, s.fail("clock skew", err)
		}
		half := after.Sub(before) / 2
		if i == 0 || half < uncertainty {
			skew, uncertainty = before.Add(half).Sub(time.UnixMicro(dbMicros)), half
		}
	}
	return skew, uncertainty, nil
}

// ChatIndexState reports whether the table has the chat index strict
// chat order reads (see [ChatIndexSQL]), and, when it has not, whether
// this store's role may build it: only the table's owner, or a member of
// the owning role, may create an index on it. For diagnostics such as
// `tgrelay doctor`; it only reads.
func (s *Store) ChatIndexState(ctx context.Context) (built, mayBuild bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT to_regclass($1::text) IS NOT NULL, pg_has_role(current_user, c.relowner, 'USAGE')
		FROM pg_class c WHERE c.oid = to_regclass($2::text)`, s.chatIndexName(), s.table).Scan(&built, &mayBuild)
	if err != nil {
		return false, false, s.fail("read the chat index's state", err)
	}
	return built, mayBuild, nil
}
