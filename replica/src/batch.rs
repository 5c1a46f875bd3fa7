//! What one Raft entry of a topic carries ([`Batch`]: the message payloads of one publish)
//! and what applying it answers ([`Applied`]).
//!
//! A batch starts with a format version: version 1 is payloads only. Adding message headers
//! later is a version 2 whose decoder fills them; a replica refuses an entry whose version it
//! does not know ([`Batch::check`]) rather than guess.

use serde::{Deserialize, Serialize};

/// The batch format this build writes.
pub const BATCH_VERSION: u8 = 1;

/// One publish: message payloads committed together under one log index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The format version ([`BATCH_VERSION`]).
    pub version: u8,
    /// The messages, in order.
    pub messages: Vec<Vec<u8>>,
}

impl Batch {
    /// A batch of `messages` in this build's format.
    pub fn new(messages: Vec<Vec<u8>>) -> Batch {
        Batch {
            version: BATCH_VERSION,
            messages,
        }
    }

    /// Whether this build can read the batch: `Err(version)` for an unknown format.
    pub fn check(&self) -> Result<(), u8> {
        if self.version == BATCH_VERSION {
            Ok(())
        } else {
            Err(self.version)
        }
    }

    /// Payload bytes in the batch.
    pub fn bytes(&self) -> usize {
        self.messages.iter().map(Vec::len).sum()
    }
}

/// What the state machine answers for an applied entry: its position in the committed log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The entry's log index, which is its position (`seq`) in the committed log.
    pub index: u64,
}
