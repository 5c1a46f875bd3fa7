//! No credential in any `Debug` output (issue 33, item 9): every frame is formatted, with a
//! token in the one frame that carries one (`Hello`), and the token's text must not appear,
//! neither as text nor as the byte-string escape `Bytes` would print.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod common;

use bytes::Bytes;
use proptest::prelude::*;
use starling_proto::{Frame, FrameDecoder, Hello, PROTOCOL_VERSION};

/// Every way `token` could show up in a formatted value.
fn leaks(formatted: &str, token: &str) -> bool {
    let escaped = format!("{:?}", Bytes::copy_from_slice(token.as_bytes()));
    let escaped = escaped.trim_start_matches("b\"").trim_end_matches('"');
    formatted.contains(token) || formatted.contains(escaped)
}

fn hello_with(token: &str) -> Hello {
    Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: 0,
        client_name: "redaction".into(),
        auth_token: Some(Bytes::copy_from_slice(token.as_bytes())),
    }
}

#[test]
fn hello_shows_the_tokens_length_and_never_the_token() {
    let token = "tok-9f8e7d6c5b4a";
    let hello = hello_with(token);
    for formatted in [
        format!("{hello:?}"),
        format!("{hello:#?}"),
        format!("{:?}", Frame::Hello(hello.clone())),
        format!("{:?}", Some(Frame::Hello(hello.clone()))),
    ] {
        assert!(!leaks(&formatted, token), "{formatted}");
        assert!(formatted.contains("redacted, 16 bytes"), "{formatted}");
    }
    // A decoded Hello (its token a slice of the received frame) is redacted as well.
    let mut wire = bytes::BytesMut::from(&Frame::Hello(hello).to_bytes()[..]);
    let decoded = FrameDecoder::new(1 << 16)
        .decode(&mut wire)
        .unwrap()
        .unwrap();
    assert!(!leaks(&format!("{decoded:?}"), token));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every frame kind is formatted; a Hello carrying any token of 8 or more printable
    /// characters never shows it (no other frame carries a credential).
    #[test]
    fn no_frame_formats_a_token(frame in common::arb_frame(), token in "[!-~]{8,40}") {
        let formatted = format!("{frame:?} {frame:#?}");
        prop_assert!(!formatted.is_empty());
        if let Frame::Hello(h) = frame {
            let frame = Frame::Hello(Hello { auth_token: Some(Bytes::from(token.clone())), ..h });
            let formatted = format!("{frame:?} {frame:#?}");
            prop_assert!(!leaks(&formatted, &token), "{}", formatted);
        }
    }
}
