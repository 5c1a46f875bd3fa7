//! The committed log's record ([`CommittedRecord`]): what the state machine stores for each
//! applied entry, and what readers of a replicated topic get back ([`Committed`]).

use bytes::Bytes;
use openraft::{EntryPayload, Membership};
use serde::{Deserialize, Serialize};

use crate::batch::Batch;
use crate::types::{Entry, LogId, Node, NodeId};

/// What the state machine keeps of one applied entry, at the entry's index. Entries that
/// carry no messages (a new leader's blank entry, a membership change) are kept too, so the
/// committed log's positions are the Raft log's indexes with no gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommittedRecord {
    /// A leader's blank entry.
    Blank {
        /// Its log id.
        log_id: LogId,
    },
    /// A publish.
    Batch {
        /// Its log id.
        log_id: LogId,
        /// Its messages.
        batch: Batch,
    },
    /// A membership change.
    Membership {
        /// Its log id.
        log_id: LogId,
        /// The configuration it set.
        membership: Membership<NodeId, Node>,
    },
}

impl CommittedRecord {
    /// The record for an applied entry.
    pub fn of(entry: Entry) -> CommittedRecord {
        let log_id = entry.log_id;
        match entry.payload {
            EntryPayload::Blank => CommittedRecord::Blank { log_id },
            EntryPayload::Normal(batch) => CommittedRecord::Batch { log_id, batch },
            EntryPayload::Membership(membership) => {
                CommittedRecord::Membership { log_id, membership }
            }
        }
    }

    /// The entry's log id.
    pub fn log_id(&self) -> LogId {
        match self {
            CommittedRecord::Blank { log_id }
            | CommittedRecord::Batch { log_id, .. }
            | CommittedRecord::Membership { log_id, .. } => *log_id,
        }
    }
}

/// One committed publish as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Its position in the committed log (the Raft log index).
    pub index: u64,
    /// The term of the leader that appended it.
    pub term: u64,
    /// Its messages (slices of the record read: shared, not copied).
    pub messages: Vec<Bytes>,
    /// Its messages' headers as they were submitted ([`Batch::headers`]; empty for none).
    pub headers: Bytes,
}
