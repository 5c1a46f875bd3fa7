//! `read_frame` / `write_frame` over an in-memory tokio duplex pipe.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use bytes::{Bytes, BytesMut};
use starling_proto::{
    AckMode, DecodeError, EventBatch, Frame, FrameDecoder, Ping, Publish, ReadError,
    encode_event_batch, read_frame, write_frame,
};
use tokio::io::{AsyncWriteExt, duplex};

fn sample_frames() -> Vec<Frame> {
    vec![
        Frame::Ping(Ping { nonce: 1 }),
        Frame::Publish(Publish {
            request_id: 2,
            ack: AckMode::Ack,
            topic: "orders".into(),
            payload: Bytes::from(vec![7u8; 10_000]),
            headers: Vec::new(),
        }),
        Frame::EventBatch(EventBatch {
            stream: 1,
            first_seq: 3,
            events: vec![Bytes::from_static(b"e")],
        }),
        Frame::Pong(Ping { nonce: 4 }),
    ]
}

#[tokio::test]
async fn frames_survive_a_pipe_with_any_read_chunk() {
    for read_chunk in [0, 1, 3, 4096, 1 << 20] {
        // A small pipe forces partial reads and writes.
        let (mut tx, mut rx) = duplex(7);
        let frames = sample_frames();
        let writer = {
            let frames = frames.clone();
            tokio::spawn(async move {
                for f in &frames {
                    write_frame(&mut tx, f).await.unwrap();
                }
                tx.shutdown().await.unwrap();
            })
        };
        let dec = FrameDecoder::new(1 << 20);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        while let Some(f) = read_frame(&mut rx, &mut buf, &dec, read_chunk)
            .await
            .unwrap()
        {
            got.push(f);
        }
        writer.await.unwrap();
        assert_eq!(got, frames, "read_chunk {read_chunk}");
    }
}

#[tokio::test]
async fn pre_encoded_event_batch_can_be_written_raw() {
    let (mut tx, mut rx) = duplex(1024);
    let events = [Bytes::from_static(b"a"), Bytes::from_static(b"b")];
    let mut shared = BytesMut::new();
    encode_event_batch(2, 10, &events, &mut shared);
    let shared = shared.freeze();
    tx.write_all(&shared).await.unwrap();
    tx.write_all(&shared).await.unwrap();
    drop(tx);
    let dec = FrameDecoder::new(1024);
    let mut buf = BytesMut::new();
    for _ in 0..2 {
        let f = read_frame(&mut rx, &mut buf, &dec, 64).await.unwrap();
        assert_eq!(
            f,
            Some(Frame::EventBatch(EventBatch {
                stream: 2,
                first_seq: 10,
                events: events.to_vec()
            }))
        );
    }
    assert!(
        read_frame(&mut rx, &mut buf, &dec, 64)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn eof_inside_a_frame_is_an_error() {
    let (mut tx, mut rx) = duplex(64);
    let wire = Frame::Ping(Ping { nonce: 9 }).to_bytes();
    tx.write_all(&wire[..11]).await.unwrap();
    drop(tx);
    let mut buf = BytesMut::new();
    let err = read_frame(&mut rx, &mut buf, &FrameDecoder::new(64), 16)
        .await
        .unwrap_err();
    assert!(matches!(err, ReadError::UnexpectedEof), "{err:?}");
}

#[tokio::test]
async fn garbage_is_a_decode_error() {
    let (mut tx, mut rx) = duplex(64);
    tx.write_all(&[9, 9, 9, 9, 9, 9, 9, 9]).await.unwrap();
    drop(tx);
    let mut buf = BytesMut::new();
    let err = read_frame(&mut rx, &mut buf, &FrameDecoder::new(64), 16)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ReadError::Decode(DecodeError::UnsupportedVersion(9))),
        "{err:?}"
    );
}

#[tokio::test]
async fn oversized_frame_is_rejected_from_the_header() {
    let (mut tx, mut rx) = duplex(64);
    let wire = Frame::Publish(Publish {
        request_id: 1,
        ack: AckMode::None,
        topic: "t".into(),
        payload: Bytes::from(vec![0u8; 100]),
        headers: Vec::new(),
    })
    .to_bytes();
    // Only the header is sent: the limit is enforced before the payload arrives.
    tx.write_all(&wire[..8]).await.unwrap();
    let mut buf = BytesMut::new();
    let err = read_frame(&mut rx, &mut buf, &FrameDecoder::new(64), 16)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ReadError::Decode(DecodeError::FrameTooLarge { max: 64, .. })
        ),
        "{err:?}"
    );
}
