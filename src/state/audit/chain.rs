//! The audit chain, its pure part: how a record is linked to the one
//! before it, and how a stored log is checked. No I/O and no clock: a
//! backend reads its rows and hands them here.
//!
//! Each record stores the hash of the record before it (`prev`) and its
//! own (`hash`), [`link_hash`] of `prev` and its fields. The first
//! record's `prev` is [`GENESIS`]; after a prune, the first kept record's
//! `prev` is the hash of the last one removed, kept as the
//! [`Checkpoint`]. The sequence number is deliberately not hashed: a row
//! moved to another position still hashes as itself, so a move is told
//! apart from an edit.
//!
//! What verification proves, and what it does not: a record changed by
//! anyone who did not recompute every later hash is found. Someone who
//! can write the store can still rewrite the whole chain consistently
//! from the record they edit onwards, or drop its newest records; a
//! head hash noted elsewhere, or a store that the writer may only
//! append to, is what stops that.
//!
//! Each record has a format. Format 1 hashes its five fields
//! ([`link_hash`]): the file's records, and a fleet's records written
//! before schema version 6. A fleet's records from version 6 on are of
//! format 2 ([`link_hash_2`]), which also hashes the two columns its
//! history index reads, the node and the operation count (security round
//! 3, item 6): a format-1 record leaves them unbound, as it always did.
//! The format is itself bound: a record relabelled to the other format no
//! longer hashes as itself.

use std::collections::HashMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The `prev` of the first record of a chain that was never pruned: 64
/// zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of a record: the lowercase hex sha256 of the UTF-8 bytes of
/// `prev`, `kind`, `turn`, `time` and `body`, each followed by a newline
/// but the last.
///
/// Exactly this, so that another backend can compute it in its own
/// language (PostgreSQL: `encode(sha256(convert_to(prev||E'\n'||kind||
/// E'\n'||turn||E'\n'||time||E'\n'||body,'UTF8')),'hex')`).
pub fn link_hash(prev: &str, kind: &str, turn: &str, time: &str, body: &str) -> String {
    let mut h = Sha256::new();
    for (i, part) in [prev, kind, turn, time, body].iter().enumerate() {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(part.as_bytes());
    }
    crate::util::hash::hex(&h.finalize())
}

/// The format of a record hashed by [`link_hash`].
pub const FORMAT_1: i64 = 1;

/// The format of a record hashed by [`link_hash_2`].
pub const FORMAT_2: i64 = 2;

/// The hash of a record of format 2: the lowercase hex sha256 of the
/// UTF-8 bytes of `2`, `prev`, `kind`, `turn`, `time`, the node as JSON
/// (a string, or `null`), the operation count as JSON (a number, or
/// `null`) and `body`, each followed by a newline but the last. The
/// leading `2` keeps a record of one format from hashing as one of the
/// other; the JSON keeps a node's name from running into the next field.
pub fn link_hash_2(
    prev: &str,
    kind: &str,
    turn: &str,
    time: &str,
    node: Option<&str>,
    operations: Option<i64>,
    body: &str,
) -> String {
    let node = node.map_or_else(
        || "null".to_string(),
        |n| serde_json::Value::from(n).to_string(),
    );
    let operations = operations.map_or_else(|| "null".to_string(), |n| n.to_string());
    let mut h = Sha256::new();
    for (i, part) in ["2", prev, kind, turn, time, &node, &operations, body]
        .iter()
        .enumerate()
    {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(part.as_bytes());
    }
    crate::util::hash::hex(&h.finalize())
}

/// One stored record of the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainRow {
    /// Its sequence number: 1, 2, … in the order records were appended
    /// (not hashed).
    pub seq: i64,
    /// `turn` (a turn's audit record) or `denial` (a denial record).
    pub kind: String,
    /// The turn it records.
    pub turn: String,
    /// When it was recorded (RFC 3339, UTC).
    pub time: String,
    /// The record itself: the line the host's audit or denial log got.
    pub body: String,
    /// The hash of the record before it.
    pub prev: String,
    /// Its own hash ([`link_hash`] of `prev` and its fields).
    pub hash: String,
    /// Its format: [`FORMAT_1`] or [`FORMAT_2`] (any other never
    /// verifies).
    pub format: i64,
    /// The node that recorded it, in a fleet's history index (hashed in
    /// format 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its turn's operation count, in a fleet's history index (hashed in
    /// format 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operations: Option<i64>,
}

impl ChainRow {
    /// Whether its hash is that of its own fields, as its format hashes
    /// them.
    pub fn self_consistent(&self) -> bool {
        let hash = match self.format {
            FORMAT_1 => link_hash(&self.prev, &self.kind, &self.turn, &self.time, &self.body),
            FORMAT_2 => link_hash_2(
                &self.prev,
                &self.kind,
                &self.turn,
                &self.time,
                self.node.as_deref(),
                self.operations,
                &self.body,
            ),
            _ => return false,
        };
        hash == self.hash
    }
}

/// The last record a prune removed: verification starts after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// Its sequence number.
    pub seq: i64,
    /// Its hash: the `prev` of the first record kept.
    pub hash: String,
}

/// A chain that verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    /// How many records it holds after the checkpoint.
    pub records: u64,
    /// The first one's sequence number (`None`: it holds none).
    pub first_seq: Option<i64>,
    /// The last one's.
    pub last_seq: Option<i64>,
    /// The hash of its newest record (or of the checkpoint, or
    /// [`GENESIS`]): noted elsewhere, it lets a later check see that
    /// nothing was rewritten or dropped up to it.
    pub head: String,
}

impl std::fmt::Display for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.first_seq, self.last_seq) {
            (Some(first), Some(last)) => write!(
                f,
                "audit chain whole: {} record{} ({first}..{last}), head {}",
                self.records,
                if self.records == 1 { "" } else { "s" },
                self.head
            ),
            _ => write!(f, "audit chain whole: 0 records, head {}", self.head),
        }
    }
}

/// How a record was tampered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tamper {
    /// Its hash does not match its own fields.
    Edited,
    /// A sequence number is missing, or a record links to one that is
    /// not in the log.
    Deleted,
    /// It does not link to the record before it, and skipping it
    /// restores the chain (or it repeats a sequence number).
    Inserted,
    /// It links to a record of the log that is not the one before it
    /// (rows swapped or moved).
    Reordered,
}

impl Tamper {
    /// The stable word: `edited`, `deleted`, `inserted` or `reordered`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tamper::Edited => "edited",
            Tamper::Deleted => "deleted",
            Tamper::Inserted => "inserted",
            Tamper::Reordered => "reordered",
        }
    }
}

impl std::fmt::Display for Tamper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first bad record of a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// Its sequence number. For [`Tamper::Deleted`], the missing one.
    pub seq: i64,
    /// Its turn. For [`Tamper::Deleted`], that of the record now after
    /// the missing one.
    pub turn: String,
    /// What was done to it.
    #[serde(rename = "tamper")]
    pub how: Tamper,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A tampered store chooses these bytes: shown escaped.
        let turn = crate::util::printable(&self.turn);
        match self.how {
            Tamper::Deleted => write!(
                f,
                "record {} was deleted (the record after it is turn `{turn}`)",
                self.seq
            ),
            how => write!(f, "record {} (turn `{turn}`) was {how}", self.seq),
        }
    }
}

impl std::error::Error for Broken {}

/// Checks a chain: `rows` in stored order (by sequence number), after
/// `checkpoint` (`None`: from record 1, linked to [`GENESIS`]).
///
/// Every record must hash as its own fields, carry the next sequence
/// number, and link to the record before it. The first one that does not
/// is named, with what was done to it:
///
/// - [`Tamper::Edited`]: its hash does not match its fields;
/// - [`Tamper::Deleted`]: a sequence number is missing (the missing one
///   is named, with the turn of the record after it), or a record links
///   to one that is in no row;
/// - [`Tamper::Inserted`]: a record that does not link to the one before
///   it while the next one does (skipping it restores the chain), a second
///   record linked to the same predecessor as the one before it, or a
///   repeated sequence number;
/// - [`Tamper::Reordered`]: a record that links to another record of the
///   log than the one before it; when the record that belongs at a place
///   sits further on, that one is named (it was moved).
pub fn verify(checkpoint: Option<&Checkpoint>, rows: &[ChainRow]) -> Result<Verified, Broken> {
    let (mut expect_prev, mut expect_seq) = match checkpoint {
        Some(c) => (c.hash.as_str(), c.seq.saturating_add(1)),
        None => (GENESIS, 1),
    };
    let whole: Vec<bool> = rows.iter().map(ChainRow::self_consistent).collect();
    for (i, r) in rows.iter().enumerate() {
        if whole[i] && r.seq == expect_seq && r.prev == expect_prev {
            expect_prev = &r.hash;
            expect_seq = r.seq.saturating_add(1);
            continue;
        }
        return Err(diagnose(rows, &whole, i, expect_prev, expect_seq));
    }
    Ok(Verified {
        records: rows.len() as u64,
        first_seq: rows.first().map(|r| r.seq),
        last_seq: rows.last().map(|r| r.seq),
        head: expect_prev.to_string(),
    })
}

/// What is wrong at `rows[i]`, the first row that does not follow the
/// accepted ones (every row before it links, in order, to `expect_prev`
/// with sequence numbers up to `expect_seq - 1`).
fn diagnose(
    rows: &[ChainRow],
    whole: &[bool],
    i: usize,
    expect_prev: &str,
    expect_seq: i64,
) -> Broken {
    let named = |r: &ChainRow, how| Broken {
        seq: r.seq,
        turn: r.turn.clone(),
        how,
    };
    let r = &rows[i];
    // The self-consistent record, from here on, that links to the last
    // accepted one: the record that belongs here.
    let successor = (i..rows.len()).find(|&k| whole[k] && rows[k].prev == expect_prev);
    let hashes: HashMap<&str, usize> = rows
        .iter()
        .enumerate()
        .map(|(k, row)| (row.hash.as_str(), k))
        .collect();
    let present = |h: &str| hashes.get(h).is_some_and(|&k| k != i);
    if r.seq < expect_seq {
        // A repeated sequence number: two records claim one place. When
        // the next record links to this one rather than the accepted
        // one, the accepted one is the extra.
        if i > 0 && r.seq == rows[i - 1].seq {
            let next_links_here = rows.get(i + 1).is_some_and(|n| n.prev == r.hash);
            if whole[i] && r.prev == rows[i - 1].prev && next_links_here {
                return named(&rows[i - 1], Tamper::Inserted);
            }
        }
        return named(r, Tamper::Inserted);
    }
    if r.seq > expect_seq {
        return match successor {
            // The missing number's record is further on: moved there.
            Some(k) if k > i => named(&rows[k], Tamper::Reordered),
            _ => Broken {
                seq: expect_seq,
                turn: r.turn.clone(),
                how: Tamper::Deleted,
            },
        };
    }
    if !whole[i] {
        return named(r, Tamper::Edited);
    }
    // In its place, self-consistent, but linked elsewhere.
    let claims_same_predecessor = i > 0 && r.prev == rows[i - 1].prev;
    match successor {
        // Skipping it restores the chain: it came from elsewhere in the
        // log (swapped, moved back) or from nowhere (inserted).
        Some(k) if k == i + 1 => {
            if present(&r.prev) && !claims_same_predecessor {
                named(r, Tamper::Reordered)
            } else {
                named(r, Tamper::Inserted)
            }
        }
        // The record before it and this one both follow the same record:
        // the one before it was inserted (linked correctly, but nothing
        // follows it).
        _ if claims_same_predecessor => named(&rows[i - 1], Tamper::Inserted),
        // The record that belongs here sits further on: moved there.
        Some(k) => named(&rows[k], Tamper::Reordered),
        None if present(&r.prev) => named(r, Tamper::Reordered),
        None => Broken {
            seq: expect_seq,
            turn: r.turn.clone(),
            how: Tamper::Deleted,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole chain of `n` records from `start` (after `checkpoint`'s).
    fn chain_from(start: Option<&Checkpoint>, n: i64) -> Vec<ChainRow> {
        let (mut prev, first) = match start {
            Some(c) => (c.hash.clone(), c.seq + 1),
            None => (GENESIS.to_string(), 1),
        };
        let mut rows = Vec::new();
        for seq in first..first + n {
            let kind = if seq % 3 == 0 { "denial" } else { "turn" };
            let turn = format!("t-{seq}");
            let time = format!("2026-12-06T10:00:{:02}Z", seq % 60);
            let body = format!("{{\"turn\":\"t-{seq}\",\"n\":{seq}}}");
            let hash = link_hash(&prev, kind, &turn, &time, &body);
            rows.push(ChainRow {
                seq,
                kind: kind.into(),
                turn,
                time,
                body,
                prev: prev.clone(),
                hash: hash.clone(),
                format: FORMAT_1,
                node: None,
                operations: None,
            });
            prev = hash;
        }
        rows
    }

    fn chain(n: i64) -> Vec<ChainRow> {
        chain_from(None, n)
    }

    fn broken(seq: i64, turn: &str, how: Tamper) -> Result<Verified, Broken> {
        Err(Broken {
            seq,
            turn: turn.into(),
            how,
        })
    }

    /// The rows with their sequence numbers renumbered 1, 2, … (after
    /// `from`) in their order: what a tamperer who hides a gap does.
    fn renumbered(mut rows: Vec<ChainRow>, from: i64) -> Vec<ChainRow> {
        for (i, r) in rows.iter_mut().enumerate() {
            r.seq = from + i as i64;
        }
        rows
    }

    /// `rows` sorted by sequence number, as a table hands them over.
    fn stored(mut rows: Vec<ChainRow>) -> Vec<ChainRow> {
        rows.sort_by_key(|r| r.seq);
        rows
    }

    /// security round 3, item 6: a record of format 2 hashes its node and
    /// operation count, and its format: changing either, or relabelling
    /// the record as format 1, breaks it; a format this build does not
    /// know never verifies.
    ///
    /// Positive control: the untouched record of each format is whole.
    #[test]
    fn a_format_2_record_binds_its_node_its_operation_count_and_its_format() {
        let mut row = ChainRow {
            seq: 1,
            kind: "turn".into(),
            turn: "t-1".into(),
            time: "2026-12-07T10:00:00Z".into(),
            body: "{}".into(),
            prev: GENESIS.into(),
            hash: String::new(),
            format: FORMAT_2,
            node: Some("node-a".into()),
            operations: Some(3),
        };
        row.hash = link_hash_2(
            GENESIS,
            "turn",
            "t-1",
            &row.time,
            Some("node-a"),
            Some(3),
            "{}",
        );
        assert!(row.self_consistent());
        // sha256 of the fields joined by newlines, as `printf` would.
        let want = format!(
            "{:x}",
            Sha256::digest(b"2\n0000000000000000000000000000000000000000000000000000000000000000\nturn\nt-1\n2026-12-07T10:00:00Z\n\"node-a\"\n3\n{}")
        );
        assert_eq!(row.hash, want);
        let edits: [fn(&mut ChainRow); 6] = [
            |r: &mut ChainRow| r.node = Some("node-b".into()),
            |r: &mut ChainRow| r.node = None,
            |r: &mut ChainRow| r.operations = Some(4),
            |r: &mut ChainRow| r.operations = None,
            |r: &mut ChainRow| r.format = FORMAT_1,
            |r: &mut ChainRow| r.format = 3,
        ];
        for edit in edits {
            let mut edited = row.clone();
            edit(&mut edited);
            assert!(!edited.self_consistent(), "{edited:?}");
            assert_eq!(
                verify(None, &[edited.clone()]),
                broken(1, "t-1", Tamper::Edited)
            );
        }
        // Format 1 leaves them unbound, as it always did.
        let mut old = row.clone();
        old.format = FORMAT_1;
        old.hash = link_hash(GENESIS, "turn", "t-1", &row.time, "{}");
        assert!(old.self_consistent());
        old.node = Some("node-b".into());
        assert!(old.self_consistent());
        assert!(verify(None, &[row]).is_ok());
    }

    #[test]
    fn the_link_hash_is_sha256_of_the_fields_joined_by_newlines() {
        // sha256("a\nb\nc\nd\ne"), as `printf 'a\nb\nc\nd\ne' | sha256sum`.
        let want = format!("{:x}", Sha256::digest(b"a\nb\nc\nd\ne"));
        assert_eq!(link_hash("a", "b", "c", "d", "e"), want);
        assert_eq!(GENESIS.len(), 64);
        assert!(GENESIS.bytes().all(|b| b == b'0'));
        // Moving a newline between fields changes the hash.
        assert_ne!(link_hash("a", "b\nc", "", "d", "e"), want);
    }

    #[test]
    fn a_whole_chain_verifies_and_names_its_range_and_head() {
        let rows = chain(12);
        let v = verify(None, &rows).unwrap();
        assert_eq!(
            v,
            Verified {
                records: 12,
                first_seq: Some(1),
                last_seq: Some(12),
                head: rows[11].hash.clone(),
            }
        );
        assert_eq!(
            v.to_string(),
            format!(
                "audit chain whole: 12 records (1..12), head {}",
                rows[11].hash
            )
        );
    }

    #[test]
    fn an_empty_log_is_whole_with_no_records() {
        let v = verify(None, &[]).unwrap();
        assert_eq!(v.records, 0);
        assert_eq!((v.first_seq, v.last_seq), (None, None));
        assert_eq!(v.head, GENESIS);
        assert_eq!(
            v.to_string(),
            format!("audit chain whole: 0 records, head {GENESIS}")
        );
        // Everything pruned: the head is the checkpoint's.
        let cp = Checkpoint {
            seq: 9,
            hash: "ab".repeat(32),
        };
        assert_eq!(verify(Some(&cp), &[]).unwrap().head, cp.hash);
    }

    #[test]
    fn an_edited_body_field_or_hash_is_named_edited() {
        for field in 0..5 {
            let mut rows = chain(10);
            let r = &mut rows[6];
            match field {
                0 => r.body.push(' '),
                1 => r.kind = "denial".into(),
                2 => r.turn = "t-other".into(),
                3 => r.time = "2026-12-06T11:00:00Z".into(),
                _ => r.hash = "f".repeat(64),
            }
            let turn = rows[6].turn.clone();
            assert_eq!(
                verify(None, &rows),
                broken(7, &turn, Tamper::Edited),
                "field {field}"
            );
        }
        let b = verify(None, &{
            let mut rows = chain(10);
            rows[6].body.push(' ');
            rows
        })
        .unwrap_err();
        assert_eq!(b.to_string(), "record 7 (turn `t-7`) was edited");
    }

    #[test]
    fn an_edit_whose_hash_was_recomputed_breaks_the_next_link() {
        // The edited record hashes as itself; the next one links to the
        // hash it had, which no row has any more.
        let mut rows = chain(10);
        let r = &mut rows[4];
        r.body = "{}".into();
        r.hash = link_hash(&r.prev, &r.kind, &r.turn, &r.time, &r.body);
        assert_eq!(verify(None, &rows), broken(6, "t-6", Tamper::Deleted));
    }

    #[test]
    fn a_deleted_record_first_middle_or_last_but_one_is_named_by_its_number() {
        for (gone, next) in [(0usize, "t-2"), (4, "t-6"), (8, "t-10")] {
            let mut rows = chain(10);
            rows.remove(gone);
            let b = verify(None, &rows).unwrap_err();
            assert_eq!(
                b,
                Broken {
                    seq: gone as i64 + 1,
                    turn: next.into(),
                    how: Tamper::Deleted
                }
            );
        }
        let mut rows = chain(10);
        rows.remove(4);
        assert_eq!(
            verify(None, &rows).unwrap_err().to_string(),
            "record 5 was deleted (the record after it is turn `t-6`)"
        );
        // Renumbered to hide the gap: the record after it links to one
        // that is not there.
        let mut rows = chain(10);
        rows.remove(4);
        let rows = renumbered(rows, 1);
        assert_eq!(verify(None, &rows), broken(5, "t-6", Tamper::Deleted));
    }

    #[test]
    fn the_newest_record_dropped_is_not_seen_without_a_known_head() {
        // What the chain cannot prove on its own: the head moved back.
        let mut rows = chain(10);
        let head = rows[9].hash.clone();
        rows.pop();
        let v = verify(None, &rows).unwrap();
        assert_ne!(v.head, head);
    }

    #[test]
    fn an_inserted_record_is_named_inserted() {
        // A forged record between 3 and 4, later ones renumbered: its own
        // hash is right, its link is not, and the next record links past it.
        let rows = chain(8);
        let prev = "c".repeat(64);
        let body = "{\"forged\":true}";
        let forged = ChainRow {
            seq: 0,
            kind: "turn".into(),
            turn: "t-forged".into(),
            time: "2026-12-06T10:00:03Z".into(),
            body: body.into(),
            prev: prev.clone(),
            hash: link_hash(&prev, "turn", "t-forged", "2026-12-06T10:00:03Z", body),
            format: FORMAT_1,
            node: None,
            operations: None,
        };
        let mut with = rows.clone();
        with.insert(3, forged.clone());
        let with = renumbered(with, 1);
        assert_eq!(verify(None, &with), broken(4, "t-forged", Tamper::Inserted));
        assert_eq!(
            verify(None, &with).unwrap_err().to_string(),
            "record 4 (turn `t-forged`) was inserted"
        );
        // Linked correctly to 3: accepted, but then record 4 (now 5) also
        // follows 3, and nothing follows the forged one.
        let mut linked = forged;
        linked.prev = rows[2].hash.clone();
        linked.hash = link_hash(
            &linked.prev,
            &linked.kind,
            &linked.turn,
            &linked.time,
            &linked.body,
        );
        let mut with = rows.clone();
        with.insert(3, linked.clone());
        let with = renumbered(with, 1);
        assert_eq!(verify(None, &with), broken(4, "t-forged", Tamper::Inserted));
        // A repeated sequence number: the extra one is named, whichever
        // of the two comes first.
        let mut twice = rows.clone();
        linked.seq = 4;
        twice.insert(4, linked.clone());
        assert_eq!(
            verify(None, &twice),
            broken(4, "t-forged", Tamper::Inserted)
        );
        let mut twice = rows.clone();
        twice.insert(3, linked);
        assert_eq!(
            verify(None, &twice),
            broken(4, "t-forged", Tamper::Inserted)
        );
    }

    #[test]
    fn two_neighbours_swapped_are_named_reordered() {
        // Their sequence numbers swapped: read back by number.
        let mut rows = chain(10);
        rows[3].seq = 5;
        rows[4].seq = 4;
        let rows = stored(rows);
        assert_eq!(verify(None, &rows), broken(4, "t-5", Tamper::Reordered));
        assert_eq!(
            verify(None, &rows).unwrap_err().to_string(),
            "record 4 (turn `t-5`) was reordered"
        );
    }

    #[test]
    fn a_record_moved_far_is_named_as_the_one_moved() {
        // Record 3 moved to the end, with a new number past the last.
        let mut rows = chain(10);
        rows[2].seq = 11;
        let rows = stored(rows);
        assert_eq!(verify(None, &rows), broken(11, "t-3", Tamper::Reordered));
        // The same, the others renumbered to close the gap.
        let mut rows = chain(10);
        let moved = rows.remove(2);
        rows.push(moved);
        let rows = renumbered(rows, 1);
        assert_eq!(verify(None, &rows), broken(10, "t-3", Tamper::Reordered));
        // Record 9 moved back to third place, the others shifted.
        let mut rows = chain(10);
        let moved = rows.remove(8);
        rows.insert(2, moved);
        let rows = renumbered(rows, 1);
        assert_eq!(verify(None, &rows), broken(3, "t-9", Tamper::Reordered));
        // Records 3 and 8 swapped.
        let mut rows = chain(10);
        rows.swap(2, 7);
        let rows = renumbered(rows, 1);
        assert_eq!(verify(None, &rows), broken(8, "t-3", Tamper::Reordered));
    }

    #[test]
    fn after_a_checkpoint_verification_starts_from_its_hash() {
        let all = chain(10);
        let cp = Checkpoint {
            seq: 4,
            hash: all[3].hash.clone(),
        };
        let kept = all[4..].to_vec();
        let v = verify(Some(&cp), &kept).unwrap();
        assert_eq!(
            (v.records, v.first_seq, v.last_seq, v.head.as_str()),
            (6, Some(5), Some(10), all[9].hash.as_str())
        );
        assert_eq!(
            v.to_string(),
            format!("audit chain whole: 6 records (5..10), head {}", all[9].hash)
        );
        // The kept rows without the checkpoint do not verify: the first
        // links to a record no longer there.
        assert_eq!(verify(None, &kept), broken(1, "t-5", Tamper::Deleted));
        // Each kind of tampering, after a checkpoint.
        let mut edited = kept.clone();
        edited[2].body.push('x');
        assert_eq!(verify(Some(&cp), &edited), broken(7, "t-7", Tamper::Edited));
        let mut first_gone = kept.clone();
        first_gone.remove(0);
        assert_eq!(
            verify(Some(&cp), &first_gone),
            broken(5, "t-6", Tamper::Deleted)
        );
        let mut swapped = kept.clone();
        swapped.swap(0, 1);
        let swapped = renumbered(swapped, 5);
        assert_eq!(
            verify(Some(&cp), &swapped),
            broken(5, "t-6", Tamper::Reordered)
        );
        // A checkpoint that was changed: the first record no longer links.
        let moved = Checkpoint {
            seq: 4,
            hash: "e".repeat(64),
        };
        assert_eq!(
            verify(Some(&moved), &kept),
            broken(5, "t-5", Tamper::Deleted)
        );
        // A pruned record put back in front of the kept ones.
        let back = all[3..].to_vec();
        assert_eq!(verify(Some(&cp), &back), broken(4, "t-4", Tamper::Inserted));
        // A chain grown after the checkpoint still verifies whole.
        let grown = chain_from(Some(&cp), 3);
        assert_eq!(verify(Some(&cp), &grown).unwrap().records, 3);
    }

    #[test]
    fn the_first_bad_record_is_named_when_there_are_several() {
        let mut rows = chain(10);
        rows[7].body.push('x');
        rows.remove(3);
        assert_eq!(verify(None, &rows), broken(4, "t-5", Tamper::Deleted));
    }

    #[test]
    fn a_turn_with_control_characters_is_shown_escaped() {
        let b = Broken {
            seq: 2,
            turn: "t\u{1b}[2J".into(),
            how: Tamper::Edited,
        };
        assert_eq!(b.to_string(), "record 2 (turn `t\\u{1b}[2J`) was edited");
    }
}
