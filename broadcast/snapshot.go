package broadcast

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// MaxRecipients is the largest audience a broadcast takes (before
// de-duplication); split a larger one into several broadcasts.
const MaxRecipients = 1 << 20

// maxSnapshotBytes bounds the snapshot file read: MaxRecipients ids of up to
// 33 bytes and a separator, and the fingerprint.
const maxSnapshotBytes = MaxRecipients*35 + 1024

// MaxFingerprintLen bounds Config.Fingerprint, in bytes.
const MaxFingerprintLen = 128

// snapshot is the audience snapshot file, audience.json:
//
//	{"fingerprint":"<Config.Fingerprint>","recipients":[123,"@channel",…]}
type snapshot struct {
	Fingerprint string      `json:"fingerprint,omitempty"`
	Recipients  []Recipient `json:"recipients"`
}

// ErrSnapshot is returned (wrapped) when the audience snapshot cannot be read
// back or is invalid.
var ErrSnapshot = errors.New("broadcast: invalid audience snapshot")

// dedupe validates recipients and removes repeats, keeping the first of each.
func dedupe(in []Recipient) ([]Recipient, error) {
	if len(in) > MaxRecipients {
		return nil, fmt.Errorf("broadcast: audience of %d recipients exceeds MaxRecipients %d", len(in), MaxRecipients)
	}
	seen := make(map[Recipient]bool, len(in))
	out := make([]Recipient, 0, len(in))
	for i, r := range in {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("broadcast: audience entry %d: %w", i, err)
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// readSnapshot loads the audience snapshot; ok is false when there is none.
func readSnapshot(path string) (snapshot, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return snapshot{}, false, nil
	}
	if err != nil {
		return snapshot{}, false, fmt.Errorf("broadcast: open snapshot: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSnapshotBytes+1))
	if err != nil {
		return snapshot{}, false, fmt.Errorf("broadcast: read snapshot: %w", err)
	}
	if len(data) > maxSnapshotBytes {
		return snapshot{}, false, fmt.Errorf("%w: larger than %d bytes", ErrSnapshot, maxSnapshotBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var snap snapshot
	if err := dec.Decode(&snap); err != nil {
		return snapshot{}, false, fmt.Errorf("%w: %v", ErrSnapshot, err)
	}
	if dec.More() {
		return snapshot{}, false, fmt.Errorf("%w: trailing data", ErrSnapshot)
	}
	rs := snap.Recipients
	if rs == nil {
		return snapshot{}, false, fmt.Errorf("%w: no recipients list", ErrSnapshot)
	}
	if len(snap.Fingerprint) > MaxFingerprintLen {
		return snapshot{}, false, fmt.Errorf("%w: fingerprint longer than %d bytes", ErrSnapshot, MaxFingerprintLen)
	}
	if len(rs) > MaxRecipients {
		return snapshot{}, false, fmt.Errorf("%w: more than %d recipients", ErrSnapshot, MaxRecipients)
	}
	seen := make(map[Recipient]bool, len(rs))
	for i, r := range rs {
		if seen[r] {
			return snapshot{}, false, fmt.Errorf("%w: entry %d repeats %s", ErrSnapshot, i, r)
		}
		seen[r] = true
	}
	return snap, true, nil
}

// writeSnapshot publishes rs at path atomically and never over an existing
// file: a private temp file, fsync, hard link to path (which fails if path
// exists), unlink of the temp name, directory fsync. checkLock runs before
// the publication.
func writeSnapshot(path string, snap snapshot, checkLock func() error) error {
	data, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("broadcast: encode snapshot: %w", err)
	}
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, ".audience-"+uuid.NewString()+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("broadcast: stage snapshot: %w", err)
	}
	defer os.Remove(tmp)
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("broadcast: stage snapshot: %w", err)
	}
	if err := checkLock(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("broadcast: publish snapshot: %w", err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that entries created in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("broadcast: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("broadcast: sync dir: %w", err)
	}
	return nil
}
