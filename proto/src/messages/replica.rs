//! `ReplicaRpc` (peer connections only): one Raft RPC of a replicated topic between the
//! brokers holding its replicas. The request and its reply are both this frame, on a stream
//! of their own: the sender opens a stream, writes one `ReplicaRpc` carrying the request, and
//! reads one `ReplicaRpc` carrying the reply (or an `Error`). The Raft message itself is
//! opaque here: `rpc` holds one frame of the replica crate's RPC codec (`starling-replica`'s
//! `codec`), which that crate bounds and decodes; see `docs/replication.md`.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::limits::MAX_TOPIC_LEN;
use crate::wire::{DecodeBody, EncodeBody, Reader, blob_len, put_blob, put_str, str_len};

/// One Raft request or reply for replicated topic `topic`.
///
/// Layout: `request_id u64 | topic str | rpc blob`. The reply echoes `request_id` and `topic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRpc {
    /// Echoed in the reply (or the `Error`).
    pub request_id: u64,
    /// The replicated topic whose replica the RPC is for.
    pub topic: String,
    /// One replica codec frame (request or reply), opaque to the protocol.
    pub rpc: Bytes,
}

impl ReplicaRpc {
    /// Bytes of the payload besides `rpc` at most: `request_id`, the longest topic and the
    /// two length prefixes.
    pub const MAX_OVERHEAD: usize = 8 + 2 + MAX_TOPIC_LEN + 4;

    /// The largest `rpc` that fits a frame of `max_frame_bytes` payload whatever the topic:
    /// the bound on a replica codec frame over a broker's peer links.
    pub fn max_rpc_bytes(max_frame_bytes: u32) -> usize {
        usize::try_from(max_frame_bytes)
            .unwrap_or(usize::MAX)
            .saturating_sub(Self::MAX_OVERHEAD)
    }
}

impl EncodeBody for ReplicaRpc {
    fn body_len(&self) -> usize {
        8 + str_len(&self.topic) + blob_len(&self.rpc)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_str(dst, &self.topic);
        put_blob(dst, &self.rpc);
    }
}

impl DecodeBody for ReplicaRpc {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplicaRpc {
            request_id: r.u64()?,
            topic: r.topic()?,
            rpc: r.blob()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::messages::test_util::round_trip;

    #[test]
    fn the_largest_rpc_fits_with_the_longest_topic() {
        let max = 4096;
        let frame = Frame::ReplicaRpc(ReplicaRpc {
            request_id: u64::MAX,
            topic: "t".repeat(MAX_TOPIC_LEN),
            rpc: Bytes::from(vec![0; ReplicaRpc::max_rpc_bytes(max)]),
        });
        assert_eq!(frame.encoded_len() - crate::HEADER_LEN, max as usize);
        assert_eq!(ReplicaRpc::max_rpc_bytes(10), 0);
    }

    #[test]
    fn layout() {
        let payload = round_trip(&Frame::ReplicaRpc(ReplicaRpc {
            request_id: 1,
            topic: "t".into(),
            rpc: Bytes::from_static(b"ab"),
        }));
        assert_eq!(
            payload,
            [0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, b'a', b'b']
        );
    }
}
