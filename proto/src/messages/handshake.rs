//! Handshake frames: `Hello` (client → server, first frame of the first
//! stream) and `HelloOk` (server → client).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::limits::PROTOCOL_VERSION;
use crate::wire::{DecodeBody, EncodeBody, Reader, blob_len, put_blob, put_str, str_len};

/// Client handshake: the version range and features the client supports.
///
/// Layout: `min_version u8 | max_version u8 | features u64 | client_name str
/// | auth_token_present u8 (0/1) | [auth_token blob]`.
///
/// Its `Debug` output never shows the token (only its length), so a logged or
/// panicking frame cannot leak a credential.
#[derive(Clone, PartialEq, Eq)]
pub struct Hello {
    /// Lowest protocol version the client speaks.
    pub min_version: u8,
    /// Highest protocol version the client speaks.
    pub max_version: u8,
    /// Requested [`features`](crate::features) bits.
    pub features: u64,
    /// Free-form client identification for logs.
    pub client_name: String,
    /// Opaque credential, checked when the server has `AUTH_TOKEN` enabled.
    pub auth_token: Option<Bytes>,
}

impl fmt::Debug for Hello {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hello")
            .field("min_version", &self.min_version)
            .field("max_version", &self.max_version)
            .field("features", &self.features)
            .field("client_name", &self.client_name)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|t| Redacted(t.len())),
            )
            .finish()
    }
}

/// A secret of this many bytes, shown as its length only.
struct Redacted(usize);

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted, {} bytes>", self.0)
    }
}

impl Hello {
    /// The version both sides would use: [`PROTOCOL_VERSION`] if it lies in
    /// `min_version..=max_version`, otherwise `None` (answer with
    /// `ErrorCode::UnsupportedVersion`).
    pub fn negotiate_version(&self) -> Option<u8> {
        (self.min_version..=self.max_version)
            .contains(&PROTOCOL_VERSION)
            .then_some(PROTOCOL_VERSION)
    }
}

impl EncodeBody for Hello {
    fn body_len(&self) -> usize {
        1 + 1
            + 8
            + str_len(&self.client_name)
            + 1
            + self.auth_token.as_ref().map_or(0, |t| blob_len(t))
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u8(self.min_version);
        dst.put_u8(self.max_version);
        dst.put_u64(self.features);
        put_str(dst, &self.client_name);
        match &self.auth_token {
            None => dst.put_u8(0),
            Some(token) => {
                dst.put_u8(1);
                put_blob(dst, token);
            }
        }
    }
}

impl DecodeBody for Hello {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Hello {
            min_version: r.u8()?,
            max_version: r.u8()?,
            features: r.u64()?,
            client_name: r.string()?,
            auth_token: if r.present()? { Some(r.blob()?) } else { None },
        })
    }
}

/// Server handshake acceptance: the chosen version and granted features.
///
/// Layout: `version u8 | features u64 | server_id str | max_frame_bytes u32
/// | epoch u64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloOk {
    /// The negotiated protocol version.
    pub version: u8,
    /// Granted [`features`](crate::features) bits (a subset of the request).
    pub features: u64,
    /// Identifier of the server node.
    pub server_id: String,
    /// Largest frame payload the server accepts; the client must not exceed it.
    pub max_frame_bytes: u32,
    /// Cluster membership epoch (0 when not clustered).
    pub epoch: u64,
}

impl EncodeBody for HelloOk {
    fn body_len(&self) -> usize {
        1 + 8 + str_len(&self.server_id) + 4 + 8
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u8(self.version);
        dst.put_u64(self.features);
        put_str(dst, &self.server_id);
        dst.put_u32(self.max_frame_bytes);
        dst.put_u64(self.epoch);
    }
}

impl DecodeBody for HelloOk {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HelloOk {
            version: r.u8()?,
            features: r.u64()?,
            server_id: r.string()?,
            max_frame_bytes: r.u32()?,
            epoch: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    fn hello(token: Option<&'static [u8]>) -> Hello {
        Hello {
            min_version: 1,
            max_version: 3,
            features: 0x0f,
            client_name: "cli".into(),
            auth_token: token.map(Bytes::from_static),
        }
    }

    #[test]
    fn hello_layout_without_token() {
        let payload = round_trip(&Frame::Hello(hello(None)));
        assert_eq!(
            payload,
            [1, 3, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0, 3, b'c', b'l', b'i', 0]
        );
    }

    #[test]
    fn hello_layout_with_token() {
        let payload = round_trip(&Frame::Hello(hello(Some(b"tk"))));
        assert_eq!(&payload[15..], &[1, 0, 0, 0, 2, b't', b'k']);
    }

    #[test]
    fn hello_bad_option_tag() {
        let payload = [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        assert_eq!(
            decode(FrameKind::Hello, &payload),
            malformed(FrameKind::Hello, "option tag is neither 0 nor 1")
        );
    }

    #[test]
    fn negotiation() {
        assert_eq!(hello(None).negotiate_version(), Some(2));
        let mut old = hello(None);
        old.max_version = 1;
        assert_eq!(old.negotiate_version(), None);
        let mut future = hello(None);
        future.min_version = 3;
        assert_eq!(future.negotiate_version(), None);
        let mut inverted = hello(None);
        inverted.min_version = 3;
        inverted.max_version = 0;
        assert_eq!(inverted.negotiate_version(), None);
    }

    #[test]
    fn hello_ok_layout() {
        let frame = Frame::HelloOk(HelloOk {
            version: 1,
            features: 3,
            server_id: "s".into(),
            max_frame_bytes: 0x0001_0000,
            epoch: 9,
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload,
            [
                1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 1, b's', 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9
            ]
        );
    }

    #[test]
    fn hello_ok_truncated() {
        let payload = [1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 1, b's', 0, 1, 0, 0];
        assert_eq!(
            decode(FrameKind::HelloOk, &payload),
            malformed(FrameKind::HelloOk, "truncated integer field")
        );
    }
}
