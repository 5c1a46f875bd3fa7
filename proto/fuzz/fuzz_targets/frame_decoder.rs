//! Fuzz target: feeds arbitrary bytes to `FrameDecoder`, whole and in
//! small chunks, and checks that it never panics, that both feeding modes
//! agree, and that every decoded frame re-encodes to the bytes it came from
//! (with the reserved flags zeroed). A decoded `Subscribe` from a time is also cut inside its
//! optional trailing `start_time_ms`, which must be malformed, never another subscription.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use starling_proto::{DecodeError, Frame, FrameDecoder, HEADER_LEN, StartAt};

const LIMIT: u32 = 64 * 1024;

/// Decodes until the decoder needs more input or fails; returns the
/// frames, the terminating error, and the raw bytes of each frame.
fn decode_all(dec: &FrameDecoder, buf: &mut BytesMut) -> (Vec<Frame>, Option<DecodeError>) {
    let mut frames = Vec::new();
    loop {
        match dec.decode(buf) {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, None),
            Err(e) => return (frames, Some(e)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let dec = FrameDecoder::new(LIMIT);

    // Whole input at once.
    let mut whole = BytesMut::from(data);
    let (frames, error) = decode_all(&dec, &mut whole);

    // Canonical encoding: frames re-encode to their input bytes.
    let mut offset = 0;
    for frame in &frames {
        let encoded = frame.to_bytes();
        let original = &data[offset..offset + encoded.len()];
        assert_eq!(encoded[..2], original[..2]);
        assert_eq!(encoded[4..], original[4..]);
        assert!(frame.payload_len() <= LIMIT as usize);
        offset += encoded.len();
        assert!(encoded.len() >= HEADER_LEN);
    }

    // Subscribe's optional trailing start_time_ms is all or nothing.
    for frame in &frames {
        if let Frame::Subscribe(s) = frame
            && matches!(s.start, StartAt::TimeMs(_))
        {
            let wire = frame.to_bytes();
            for cut in 1..8 {
                let mut short = BytesMut::from(&wire[..wire.len() - cut]);
                let len = u32::try_from(wire.len() - cut - HEADER_LEN).unwrap();
                short[4..8].copy_from_slice(&len.to_be_bytes());
                assert!(matches!(
                    dec.decode(&mut short),
                    Err(DecodeError::Malformed { .. })
                ));
            }
        }
    }

    // Same input fed in chunks of 1..=7 bytes must give the same result.
    let mut chunked = BytesMut::new();
    let mut chunked_frames = Vec::new();
    let mut chunked_error = None;
    let step = usize::from(data.first().copied().unwrap_or(0) % 7) + 1;
    for piece in data.chunks(step) {
        chunked.extend_from_slice(piece);
        let (mut got, err) = decode_all(&dec, &mut chunked);
        chunked_frames.append(&mut got);
        if err.is_some() {
            chunked_error = err;
            break;
        }
    }
    assert_eq!(frames, chunked_frames);
    assert_eq!(error, chunked_error);
});
