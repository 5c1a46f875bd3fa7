//! The ALPN protocol names a connection offers in its TLS handshake. They choose the kind of
//! connection before any frame is read: the broker serves publish/subscribe or cache streams
//! on a connection according to the name the client negotiated. Broker and SDK both take them
//! from here.

/// Publish and subscribe connections (and the cluster's peer links).
pub const EVENTS: &[u8] = b"starling/1";
/// Cache connections.
pub const CACHE: &[u8] = b"starling-cache/1";
