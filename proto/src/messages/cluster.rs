//! Cluster frames: `Moved` (server → client redirect to a topic's or key's
//! owner), `ClusterInfoRequest` (client → server) and `ClusterInfo` (server →
//! client, the member list a routing SDK places requests with). A single-node
//! broker never sends `Moved`.

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::wire::{DecodeBody, EncodeBody, Reader, put_str, str_len};

/// The request must be sent to another member.
///
/// Layout: `request_id u64 | epoch u64 | owner str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The redirected request.
    pub request_id: u64,
    /// Membership epoch the redirect is based on.
    pub epoch: u64,
    /// Address (`host:port`) of the member owning the topic or key.
    pub owner: String,
}

impl EncodeBody for Moved {
    fn body_len(&self) -> usize {
        8 + 8 + str_len(&self.owner)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u64(self.epoch);
        put_str(dst, &self.owner);
    }
}

impl DecodeBody for Moved {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Moved {
            request_id: r.u64()?,
            epoch: r.u64()?,
            owner: r.string()?,
        })
    }
}

/// Asks for the current membership.
///
/// Layout: `request_id u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterInfoRequest {
    /// Echoed in `ClusterInfo`.
    pub request_id: u64,
}

impl EncodeBody for ClusterInfoRequest {
    fn body_len(&self) -> usize {
        8
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
    }
}

impl DecodeBody for ClusterInfoRequest {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterInfoRequest {
            request_id: r.u64()?,
        })
    }
}

/// One cluster member.
///
/// Layout: `id str | addr str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Member id (the `server_id` it reports in `HelloOk`).
    pub id: String,
    /// Client-facing address, `host:port`.
    pub addr: String,
}

/// Smallest encoding of a [`Member`]: two empty strings.
const MIN_MEMBER_LEN: usize = 4;

/// Current membership.
///
/// Layout: `request_id u64 | epoch u64 | count u32 | count × member`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The `ClusterInfoRequest` being answered.
    pub request_id: u64,
    /// Membership epoch.
    pub epoch: u64,
    /// All members, including the answering node.
    pub members: Vec<Member>,
}

impl EncodeBody for ClusterInfo {
    fn body_len(&self) -> usize {
        let members: usize = self
            .members
            .iter()
            .take(u32::MAX as usize)
            .map(|m| str_len(&m.id) + str_len(&m.addr))
            .sum();
        8 + 8 + 4 + members
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u64(self.epoch);
        let count = self.members.len().min(u32::MAX as usize);
        dst.put_u32(u32::try_from(count).unwrap_or(u32::MAX));
        for member in self.members.iter().take(count) {
            put_str(dst, &member.id);
            put_str(dst, &member.addr);
        }
    }
}

impl DecodeBody for ClusterInfo {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let epoch = r.u64()?;
        let count = r.count(MIN_MEMBER_LEN)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            members.push(Member {
                id: r.string()?,
                addr: r.string()?,
            });
        }
        Ok(ClusterInfo {
            request_id,
            epoch,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    #[test]
    fn moved_layout() {
        let payload = round_trip(&Frame::Moved(Moved {
            request_id: 1,
            epoch: 2,
            owner: "h:1".into(),
        }));
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 3, b'h', b':', b'1'
            ]
        );
    }

    #[test]
    fn request_layout() {
        let payload = round_trip(&Frame::ClusterInfoRequest(ClusterInfoRequest {
            request_id: 6,
        }));
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 6]);
    }

    #[test]
    fn info_layout() {
        let frame = Frame::ClusterInfo(ClusterInfo {
            request_id: 6,
            epoch: 1,
            members: vec![Member {
                id: "a".into(),
                addr: "b".into(),
            }],
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b'a', 0, 1, b'b'
            ]
        );
    }

    #[test]
    fn info_count_bounded() {
        // Claims 2 members but only 4 bytes (one empty member) remain.
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0,
        ];
        assert_eq!(
            decode(FrameKind::ClusterInfo, &payload),
            malformed(
                FrameKind::ClusterInfo,
                "element count exceeds remaining bytes"
            )
        );
    }
}
