//! Protocol-wide constants: the version number, the header size and the
//! length limits on topics and cache keys.

/// The only protocol version this crate speaks, negotiated by [`Hello`](crate::Hello) /
/// [`HelloOk`](crate::HelloOk). It fixes the frame body layouts. Version 2 added stream
/// positions to `EventBatch` and a resume position to `Subscribe`.
pub const PROTOCOL_VERSION: u8 = 2;

/// The framing version carried in every frame header. It covers only the header and is
/// unchanged since version 1, so a peer of any protocol version can read a `Hello` and the
/// `Error` refusing it.
pub const FRAMING_VERSION: u8 = 1;

/// Size of the fixed frame header in bytes.
pub const HEADER_LEN: usize = 8;

/// Maximum topic length in bytes (topics must also be non-empty).
pub const MAX_TOPIC_LEN: usize = 255;

/// Maximum cache key length in bytes (keys must also be non-empty).
pub const MAX_KEY_LEN: usize = 1024;
