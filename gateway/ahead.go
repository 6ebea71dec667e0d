package gateway

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// Replays without a turn.
//
// A retried attempt's handler makes again the calls its earlier attempt
// made, and those the journal holds with a final outcome (answered or
// unknown) are replayed: nothing is sent. Yet a call's journal entry is
// read at its turn, and the earlier attempt's sends have just used up its
// chat's window: each replay would wait seconds in a private chat, up to a
// minute in a group, and get the limiter's 429 past its MaxWait, for a
// call that sends nothing.
//
// So the first journaled call of an attempt after the first lists its
// update's journal once, and keeps a hash of each call with a final
// outcome (at most maxFinalCalls, in the occurrence counters' memory). A
// call found there runs its gate at once, before the limiter: the journal
// replays it, fenced as ever. A call not found there (a new call, one
// pending or not dispatched when listed, one past the bound) waits for its
// turn as before. A final outcome never changes, so the listing is never
// wrong about a call it holds, only short. A new call whose hash collides
// with a listed one (a chance of about one in 2^56) runs its gate early:
// its intent is recorded before its turn rather than at it, and it is
// sent at its turn as any other.

// maxFinalCalls bounds the final outcomes kept per attempt.
const maxFinalCalls = 256

// finalInJournal reports whether the journal held call with a final
// outcome when attempt id, an attempt after its update's first, first
// asked. A failed listing reports false and is not kept: the gate reads
// the journal at the call's turn, as for every call.
func (g *Gateway) finalInJournal(ctx context.Context, id intake.Identity, call intake.Call) bool {
	if id.Attempt <= 1 {
		return false
	}
	keys, ok := g.occ.finals(id)
	if !ok {
		es, err := g.journal.Journal(ctx, id.UpdateID)
		if err != nil {
			return false
		}
		keys = make([]uint64, 0, min(len(es), maxFinalCalls))
		for _, e := range es {
			if len(keys) == maxFinalCalls {
				break
			}
			if e.Outcome == intake.CallAnswered || e.Outcome == intake.CallUnknown {
				keys = append(keys, g.callHash(e.Call))
			}
		}
		slices.Sort(keys)
		g.occ.setFinals(id, keys)
	}
	_, found := slices.BinarySearch(keys, g.callHash(call))
	return found
}

// callHash hashes a journal entry's key.
func (g *Gateway) callHash(c intake.Call) uint64 {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(c.Method)
	h.WriteByte(0)
	h.WriteString(c.ParamsHash)
	h.WriteByte(0)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(c.Occurrence))
	h.Write(n[:])
	return h.Sum64()
}

// runAhead runs gt now, before the call asks for its turn, and reports
// whether that ended the call: replayed, or refused (stale, or the store
// failed). Otherwise the call goes on to its turn, where gt passes at once
// if it recorded the intent.
func (gt *gate) runAhead() bool {
	_ = gt.run() // its state tells what happened
	return gt.state == gateReplayed || gt.state == gateRefused
}
