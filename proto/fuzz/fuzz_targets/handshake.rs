//! Fuzz target: the handshake a broker reads first from every connection. Arbitrary bytes go
//! through the frame decoder with the header forced to `Hello` (so the fuzzer spends its time
//! in the body, not in reaching a valid header), then through what the broker does with a
//! `Hello`: version negotiation and the feature grant. Checks that nothing panics, that a
//! decoded `Hello` re-encodes to the bytes it came from, that a negotiated version lies in the
//! client's range, and that a grant is a subset of both the request and the known bits.
#![no_main]

use bytes::{BufMut, BytesMut};
use libfuzzer_sys::fuzz_target;
use starling_proto::{
    FRAMING_VERSION, Frame, FrameDecoder, FrameKind, HEADER_LEN, PROTOCOL_VERSION, Role, features,
};

const LIMIT: u32 = 64 * 1024;

fuzz_target!(|body: &[u8]| {
    if body.len() > LIMIT as usize {
        return;
    }
    let mut buf = BytesMut::with_capacity(HEADER_LEN + body.len());
    buf.put_u8(FRAMING_VERSION);
    buf.put_u8(FrameKind::Hello as u8);
    buf.put_u16(0);
    buf.put_u32(body.len() as u32);
    buf.extend_from_slice(body);
    let framed = buf.clone().freeze();

    let dec = FrameDecoder::new(LIMIT);
    let hello = match dec.decode(&mut buf) {
        Ok(Some(Frame::Hello(h))) => h,
        Ok(Some(other)) => panic!("a Hello header decoded as {}", other.name()),
        Ok(None) => panic!("a complete frame was reported incomplete"),
        Err(_) => return,
    };
    // Canonical: the decoded Hello is exactly the bytes it came from, nothing left over.
    assert!(buf.is_empty());
    assert_eq!(Frame::Hello(hello.clone()).to_bytes(), framed);

    if let Some(v) = hello.negotiate_version() {
        assert_eq!(v, PROTOCOL_VERSION);
        assert!(hello.min_version <= v && v <= hello.max_version);
    } else {
        assert!(!(hello.min_version..=hello.max_version).contains(&PROTOCOL_VERSION));
    }
    let granted = hello.features & features::ALL;
    assert_eq!(granted & !hello.features, 0);
    // The role read back from any grant is one of the three, and a peer needs the token bit.
    if Role::from_granted(granted) == Role::Peer {
        assert_ne!(granted & features::PEER, 0);
    }
});
