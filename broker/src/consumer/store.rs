//! A durable consumer's state file, `consumer.<name>.state` in its topic's log directory (the
//! storage ignores files it does not know): the consumer's settings and its
//! [`Snapshot`] (ack floor, positions resolved above it, deliveries of pending messages),
//! written whole to a temporary file, fsynced, renamed over the old one and the directory
//! fsynced, so a crash leaves the old state or the new one, never a mix.
//!
//! Layout (big-endian): `magic "STCS" | version u8 (1) | ack_wait_ms u64 | max_deliver u32 |
//! max_ack_pending u32 | backoff_count u16 | backoff_count × u64 | dead_letter u16-length str
//! (empty: none) | floor_stream u64 | floor_seq u64 | resolved_count u32 | resolved_count ×
//! (stream u64, seq u64) | delivered_count u32 | delivered_count × (stream u64, seq u64,
//! deliveries u32) | CRC-32C u32 of every byte before it`. The decoder treats the file as
//! untrusted bytes: every count is checked against the bytes left before anything is
//! allocated, and any damage is a typed [`StoreError`] (the consumer is then refused, never
//! silently reset).

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::{Buf, BufMut, BytesMut};
use starling_proto::{MAX_BACKOFF_STEPS, Position, validate_topic};
use starling_pubsub::consumer::{Policy, Snapshot};

const MAGIC: &[u8; 4] = b"STCS";
const VERSION: u8 = 1;

/// A consumer's settings as they are kept: its policy and its dead-letter topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Delivery and redelivery.
    pub policy: Policy,
    /// Where messages past `max_deliver` go, if anywhere.
    pub dead_letter: Option<String>,
}

/// What is in a state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The settings the consumer was created with.
    pub settings: Settings,
    /// Where it stands.
    pub snapshot: Snapshot,
}

/// Why a state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file is damaged or not a state file.
    #[error("consumer state file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
    /// A file operation failed.
    #[error("consumer state file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// The state file of consumer `name` in log directory `dir` (names are checked by
/// `validate_consumer`: ASCII letters, digits, `-`, `_`, `.`).
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("consumer.{name}.state"))
}

/// Encodes a state file.
pub fn encode(stored: &Stored) -> Vec<u8> {
    let mut b = BytesMut::new();
    let p = &stored.settings.policy;
    b.put_slice(MAGIC);
    b.put_u8(VERSION);
    b.put_u64(p.ack_wait_ms);
    b.put_u32(p.max_deliver);
    b.put_u32(p.max_ack_pending);
    b.put_u16(p.backoff_ms.len() as u16);
    for d in &p.backoff_ms {
        b.put_u64(*d);
    }
    let dl = stored.settings.dead_letter.as_deref().unwrap_or("");
    b.put_u16(dl.len() as u16);
    b.put_slice(dl.as_bytes());
    let s = &stored.snapshot;
    b.put_u64(s.floor.stream);
    b.put_u64(s.floor.seq);
    b.put_u32(s.resolved.len() as u32);
    for r in &s.resolved {
        b.put_u64(r.stream);
        b.put_u64(r.seq);
    }
    b.put_u32(s.deliveries.len() as u32);
    for (r, n) in &s.deliveries {
        b.put_u64(r.stream);
        b.put_u64(r.seq);
        b.put_u32(*n);
    }
    let crc = crc32c::crc32c(&b);
    b.put_u32(crc);
    b.to_vec()
}

/// A reader of untrusted bytes that refuses to read past the end.
struct Cur<'a>(&'a [u8]);

impl Cur<'_> {
    fn need(&self, n: usize) -> Result<(), &'static str> {
        if self.0.len() < n {
            Err("cut short")
        } else {
            Ok(())
        }
    }
    fn u8(&mut self) -> Result<u8, &'static str> {
        self.need(1)?;
        Ok(self.0.get_u8())
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        self.need(2)?;
        Ok(self.0.get_u16())
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        self.need(4)?;
        Ok(self.0.get_u32())
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        self.need(8)?;
        Ok(self.0.get_u64())
    }
    fn count(&mut self, elem: usize) -> Result<usize, &'static str> {
        let n = self.u32()? as usize;
        self.need(n.checked_mul(elem).ok_or("count too large")?)?;
        Ok(n)
    }
}

/// Decodes a state file's bytes (untrusted); `Err` with a short reason.
pub fn decode(bytes: &[u8]) -> Result<Stored, &'static str> {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err("cut short");
    };
    let (body, crc) = bytes.split_at(body_len);
    let mut c = Cur(crc);
    if crc32c::crc32c(body) != c.u32()? {
        return Err("checksum mismatch");
    }
    let mut c = Cur(body);
    c.need(4)?;
    if &c.0[..4] != MAGIC {
        return Err("not a consumer state file (magic)");
    }
    c.0.advance(4);
    if c.u8()? != VERSION {
        return Err("unknown state file version");
    }
    let ack_wait_ms = c.u64()?;
    let max_deliver = c.u32()?;
    let max_ack_pending = c.u32()?;
    if ack_wait_ms == 0 || max_ack_pending == 0 {
        return Err("ack_wait_ms or max_ack_pending is 0");
    }
    let steps = c.u16()? as usize;
    if steps > MAX_BACKOFF_STEPS {
        return Err("backoff schedule too long");
    }
    c.need(steps * 8)?;
    let backoff_ms = (0..steps).map(|_| c.0.get_u64()).collect();
    let dl_len = c.u16()? as usize;
    c.need(dl_len)?;
    let dl = std::str::from_utf8(&c.0[..dl_len]).map_err(|_| "dead-letter topic not UTF-8")?;
    let dead_letter = if dl.is_empty() {
        None
    } else {
        validate_topic(dl).map_err(|_| "invalid dead-letter topic")?;
        Some(dl.to_string())
    };
    c.0.advance(dl_len);
    let floor = Position {
        stream: c.u64()?,
        seq: c.u64()?,
    };
    let n = c.count(16)?;
    let mut resolved = Vec::with_capacity(n);
    for _ in 0..n {
        resolved.push(Position {
            stream: c.0.get_u64(),
            seq: c.0.get_u64(),
        });
    }
    let n = c.count(20)?;
    let mut deliveries = Vec::with_capacity(n);
    for _ in 0..n {
        let p = Position {
            stream: c.0.get_u64(),
            seq: c.0.get_u64(),
        };
        deliveries.push((p, c.0.get_u32()));
    }
    if !c.0.is_empty() {
        return Err("trailing bytes");
    }
    Ok(Stored {
        settings: Settings {
            policy: Policy {
                ack_wait_ms,
                max_deliver,
                backoff_ms,
                max_ack_pending,
            },
            dead_letter,
        },
        snapshot: Snapshot {
            floor,
            resolved,
            deliveries,
        },
    })
}

/// Reads the state file at `path`; `Ok(None)` when there is none. Blocking file I/O.
pub fn load(path: &Path) -> Result<Option<Stored>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => decode(&bytes)
            .map(Some)
            .map_err(|reason| StoreError::Corrupt {
                path: path.to_path_buf(),
                reason,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes the state file at `path` atomically and durably (temporary file, fsync, rename,
/// directory fsync). Blocking file I/O.
pub fn save(path: &Path, stored: &Stored) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("state.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(&encode(stored)).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stored() -> Stored {
        Stored {
            settings: Settings {
                policy: Policy {
                    ack_wait_ms: 30_000,
                    max_deliver: 5,
                    backoff_ms: vec![10, 20],
                    max_ack_pending: 100,
                },
                dead_letter: Some("jobs.dead".into()),
            },
            snapshot: Snapshot {
                floor: Position { stream: 9, seq: 3 },
                resolved: vec![Position { stream: 9, seq: 5 }],
                deliveries: vec![(Position { stream: 9, seq: 3 }, 2)],
            },
        }
    }

    #[test]
    fn a_state_file_round_trips_and_damage_is_refused() {
        let bytes = encode(&stored());
        assert_eq!(decode(&bytes), Ok(stored()));
        let mut flipped = bytes.clone();
        flipped[10] ^= 1;
        assert_eq!(decode(&flipped), Err("checksum mismatch"));
        assert_eq!(decode(&bytes[..3]), Err("cut short"));
        assert_eq!(decode(&[]), Err("cut short"));
    }

    #[test]
    fn save_replaces_the_file_whole() {
        let dir =
            std::env::temp_dir().join(format!("starling-consumer-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = path(&dir, "w");
        assert!(load(&p).unwrap().is_none());
        save(&p, &stored()).unwrap();
        let mut next = stored();
        next.snapshot.floor.seq = 6;
        save(&p, &next).unwrap();
        assert_eq!(load(&p).unwrap(), Some(next));
        std::fs::write(&p, b"garbage").unwrap();
        assert!(matches!(load(&p), Err(StoreError::Corrupt { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    proptest! {
        /// Arbitrary bytes never panic the decoder, and a valid file with a good checksum but
        /// cut or extended bodies is refused.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn every_cut_of_a_valid_file_is_refused(
            floor in any::<(u64, u64)>(),
            resolved in proptest::collection::vec(any::<(u64, u64)>(), 0..8),
            delivered in proptest::collection::vec(any::<(u64, u64, u32)>(), 0..8),
            backoff in proptest::collection::vec(any::<u64>(), 0..=16),
            max_deliver in any::<u32>(),
            dl in proptest::option::of("[a-z.]{1,30}"),
        ) {
            let s = Stored {
                settings: Settings {
                    policy: Policy { ack_wait_ms: 1, max_deliver, backoff_ms: backoff, max_ack_pending: 1 },
                    dead_letter: dl,
                },
                snapshot: Snapshot {
                    floor: Position { stream: floor.0, seq: floor.1 },
                    resolved: resolved.iter().map(|(a, b)| Position { stream: *a, seq: *b }).collect(),
                    deliveries: delivered.iter().map(|(a, b, n)| (Position { stream: *a, seq: *b }, *n)).collect(),
                },
            };
            let bytes = encode(&s);
            prop_assert_eq!(decode(&bytes), Ok(s));
            for cut in 0..bytes.len() {
                // Re-sealed with a fresh checksum, so the structure checks are what refuse it.
                let mut body = bytes[..cut.min(bytes.len() - 4)].to_vec();
                let crc = crc32c::crc32c(&body);
                body.extend_from_slice(&crc.to_be_bytes());
                prop_assert!(decode(&body).is_err() || body.len() == bytes.len());
                prop_assert!(decode(&bytes[..cut]).is_err());
            }
        }
    }
}
