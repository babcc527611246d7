// Package admission caps the HTTP streams in flight across every VM of one
// Envoy process and rejects oversize request bodies early. It wraps any
// HTTP-context factory (Guard.Wrap), so the filter it protects never learns
// about it: a rejected stream gets a local reply and its inner context is
// never created, so it costs no WAF transaction and no body buffering.
//
// # Where the count lives
//
// Envoy runs one VM per worker thread plus one on the main thread, so Go
// memory counts one worker only. The count lives in shared data (one map per
// vm_id, process-wide) under one key (shared_data_key). Its value holds one
// entry per member, a member being one Guard, that is one plugin on one VM:
//
//	member id (64 random bits) | heartbeat (unix ms) | streams in flight |
//	429s in the last tick period | in-flight count per capped authority
//
// The process total is the sum of the entries. Every change rewrites the
// whole value with the CAS from the get before it, so all changes are
// serialized: acquire is one get (sum the others, compare with the cap) and
// one set (this member's entry plus one); release is one get and one set; a
// rejection is one get and no set. A CAS conflict repeats the get and set, at
// most cas_retries times.
//
// A member writes only its own entry, and always from its local counts (the
// streams of this Guard that hold a slot), never by adding to what it read.
// So a write that failed (retries exhausted, host error) is corrected by the
// member's next successful write, at the latest its next tick, and a failed
// release only leaves the entry too high, which errs towards rejecting.
//
// # Registration and repair
//
// Start draws the member id (crypto/rand; redrawn if already present) and
// writes the first entry with a heartbeat; that entry is the registration.
// OnTick, every tick_period_ms on every VM, rewrites this member's entry with
// a new heartbeat and, in the same CAS write, drops every entry whose
// heartbeat is older than stale_after_ms. A VM that trapped, or was replaced
// by a reload, runs no OnHttpStreamDone for its streams (Envoy answers them
// 503 and they end), and no more ticks; its slots return when a live member
// drops its entry: within stale_after_ms + tick_period_ms of its last tick,
// as long as one VM of the process ticks (the main-thread VM always does).
// Dropping an entry removes exactly the slots it held, because the total is
// the sum of the entries.
//
// A member that finds its own entry missing (dropped while its thread was
// stalled past stale_after_ms, or lost to a racing first write: Envoy lets a
// set on a missing key succeed whatever the cas) adds it back, with a fresh
// heartbeat and its exact local counts, on its next write. A value that
// cannot be decoded is replaced; every member adds itself back the same way.
//
// # Retries exhausted
//
// When the retries run out on acquire (or the store fails), the default
// (on_cas_exhausted "reject") answers 429: conflicts pile up only when many
// workers write at once, that is under the heaviest load, and admitting
// uncounted streams then would let the cap be exceeded exactly when it
// matters; a 429 with Retry-After is cheap for the client to retry.
// "admit" counts the stream locally and publishes it on the next write. The
// metric wafguard_admission_cas_exhausted counts every exhaustion, and
// wafguard_admission_rejected_reason=cas_exhausted the 429s it caused.
//
// # Retry-After
//
// The base is retry_after_seconds × (1 + L), where L is the number of 429s
// the whole process sent in the last tick period (published in the entries)
// divided by the cap, capped at retry_after_max_seconds. The header value is
// the base plus a random 0..ceil(base/2) seconds, so rejected clients do not
// return in lockstep.
//
// # Host calls
//
// New makes none. Start defines the metrics, pre-builds the replies, sets
// the tick period and registers; it must run in OnPluginStart, never in
// init(). Nothing blocks, sleeps or forces a GC. docs/admission.md lists the
// configuration keys and their defaults.
package admission
