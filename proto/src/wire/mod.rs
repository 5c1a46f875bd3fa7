//! Building blocks for frame payloads: a bounds-checked [`Reader`] for
//! decoding, length-prefixed writers for encoding, and the two traits every
//! frame body implements.

mod reader;
mod writer;

pub(crate) use reader::Reader;
pub(crate) use writer::{
    blob_len, blobs_len, key_len, put_blob, put_blobs, put_bool, put_key, put_str, str_len,
};

use bytes::BytesMut;

use crate::error::DecodeError;

/// Encoding half of a frame body codec. Object safe, so [`Frame`](crate::Frame)
/// can hand out `&dyn EncodeBody` and share one header-writing path.
pub(crate) trait EncodeBody {
    /// Exact number of bytes [`EncodeBody::encode_body`] will write.
    fn body_len(&self) -> usize;
    /// Appends the payload (no header) to `dst`.
    fn encode_body(&self, dst: &mut BytesMut);
}

/// Decoding half of a frame body codec.
pub(crate) trait DecodeBody: Sized {
    /// Reads every field of the body from `r`. The caller checks that no
    /// bytes remain afterwards.
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError>;
}
