//! The snapshot format: the topic's retained committed records, whole ([`SnapshotImage`]).
//!
//! A follower that is behind the leader's purged Raft log gets the leader's committed log as
//! it stands (every record retention kept, up to the snapshot's last log id) and replaces its
//! own with it. This is the simple, correct choice: a snapshot costs memory and bytes on the
//! wire in proportion to the retained log. Streaming sealed segments instead (openraft's
//! `generic-snapshot-data`) is the known next step for large topics.

use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::committed::CommittedRecord;

/// The image's format version.
pub const SNAPSHOT_VERSION: u8 = 1;

/// A snapshot's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotImage {
    /// The format version ([`SNAPSHOT_VERSION`]).
    pub version: u8,
    /// The retained committed records, in index order with no gap.
    pub records: Vec<CommittedRecord>,
}

impl SnapshotImage {
    /// The image's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        codec::encode_body(self)
    }

    /// Parses and checks an image of at most `max` bytes: a known version, records with
    /// contiguous indexes.
    pub fn decode(bytes: &[u8], max: usize) -> Result<SnapshotImage, CodecError> {
        let image: SnapshotImage = codec::decode_body(bytes, max)?;
        if image.version != SNAPSHOT_VERSION {
            return Err(CodecError::Body(format!(
                "unknown snapshot version {}",
                image.version
            )));
        }
        for pair in image.records.windows(2) {
            if pair[1].log_id().index != pair[0].log_id().index + 1 {
                return Err(CodecError::Body(
                    "snapshot records are not contiguous".into(),
                ));
            }
        }
        Ok(image)
    }
}
