//! `Ping` and `Pong`: liveness probes allowed on any stream. Both carry the
//! same body; the receiver of a `Ping` answers with a `Pong` echoing the nonce.

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::wire::{DecodeBody, EncodeBody, Reader};

/// Body of `Ping` and `Pong`.
///
/// Layout: `nonce u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ping {
    /// Opaque value echoed back in the `Pong`.
    pub nonce: u64,
}

impl EncodeBody for Ping {
    fn body_len(&self) -> usize {
        8
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.nonce);
    }
}

impl DecodeBody for Ping {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Ping { nonce: r.u64()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::messages::test_util::round_trip;

    #[test]
    fn ping_and_pong_share_a_layout() {
        let ping = round_trip(&Frame::Ping(Ping { nonce: 0xabcd }));
        let pong = round_trip(&Frame::Pong(Ping { nonce: 0xabcd }));
        assert_eq!(ping, [0, 0, 0, 0, 0, 0, 0xab, 0xcd]);
        assert_eq!(ping, pong);
        assert_ne!(
            Frame::Ping(Ping { nonce: 1 }).to_bytes(),
            Frame::Pong(Ping { nonce: 1 }).to_bytes()
        );
    }
}
