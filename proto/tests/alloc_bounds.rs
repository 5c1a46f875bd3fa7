//! Allocation bounds, measured with a counting global allocator: hostile
//! lengths and counts must be rejected without allocating for them.
//!
//! This binary holds a single test so that no other test allocates while a
//! measurement runs; measurement is also limited to the measuring thread.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, BytesMut};
use starling_proto::{DecodeError, FrameDecoder, FrameKind};

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
static TOTAL: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
}

fn record(size: usize) {
    if TRACKING.try_with(Cell::get).unwrap_or(false) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
        TOTAL.fetch_add(size, Ordering::Relaxed);
    }
}

// SAFETY: defers every operation to `System`; only adds bookkeeping. The workspace denies
// `unsafe_code`; a counting allocator is the one way to measure what decoding allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns (its result, largest single allocation, total allocated).
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    LARGEST.store(0, Ordering::Relaxed);
    TOTAL.store(0, Ordering::Relaxed);
    TRACKING.with(|t| t.set(true));
    let out = f();
    TRACKING.with(|t| t.set(false));
    (
        out,
        LARGEST.load(Ordering::Relaxed),
        TOTAL.load(Ordering::Relaxed),
    )
}

fn header(kind: FrameKind, payload_len: u32) -> BytesMut {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_u8(starling_proto::FRAMING_VERSION);
    buf.put_u8(kind.as_u8());
    buf.put_u16(0);
    buf.put_u32(payload_len);
    buf
}

#[test]
fn hostile_sizes_do_not_allocate() {
    // 1. A 4 GiB payload claim against a 1 MiB limit: rejected, nothing allocated.
    let dec = FrameDecoder::new(1 << 20);
    let mut buf = header(FrameKind::Publish, u32::MAX);
    let (result, largest, total) = measure(|| dec.decode(&mut buf));
    assert_eq!(
        result,
        Err(DecodeError::FrameTooLarge {
            len: u32::MAX,
            max: 1 << 20
        })
    );
    assert_eq!((largest, total), (0, 0));

    // 2. A claim exactly at the limit with only the header present: nothing
    //    is reserved from the claim; the buffer grows by the floor only.
    let mut buf = header(FrameKind::Publish, 1 << 20);
    let (result, largest, _) = measure(|| dec.decode(&mut buf));
    assert_eq!(result, Ok(None));
    assert!(
        largest <= 2 * (8 + starling_proto::GROW_FLOOR),
        "reserved {largest} bytes for a header alone"
    );
    // Also proves the counter sees allocations made inside `decode`.
    assert!(
        largest >= starling_proto::GROW_FLOOR,
        "reserved only {largest} bytes"
    );

    // 3. Element counts of ~4 billion in tiny frames, for every counted list.
    let cases: [(FrameKind, &[u8]); 3] = [
        // request_id, ack, topic "t", count
        (
            FrameKind::PublishBatch,
            &[
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
            ],
        ),
        // stream, first_seq, count
        (
            FrameKind::EventBatch,
            &[
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0,
            ],
        ),
        // request_id, epoch, count, one empty member
        (
            FrameKind::ClusterInfo,
            &[
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
            ],
        ),
    ];
    for (kind, payload) in cases {
        let mut buf = header(kind, u32::try_from(payload.len()).unwrap());
        buf.put_slice(payload);
        let dec = FrameDecoder::new(u32::MAX);
        let (result, largest, total) = measure(|| dec.decode(&mut buf));
        assert_eq!(
            result,
            Err(DecodeError::Malformed {
                frame: kind.name(),
                reason: "element count exceeds remaining bytes"
            }),
            "{kind}"
        );
        assert!(
            largest < 256 && total < 1024,
            "{kind}: largest {largest}, total {total}"
        );
    }

    // 4. A batch of a million empty payloads (4 MiB on the wire, 32 MiB of handles once
    //    decoded) against an item cap of 1024: refused before the handles are allocated.
    const ITEMS: u32 = 1 << 20;
    let mut body = BytesMut::new();
    body.put_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't']);
    body.put_u32(ITEMS);
    body.put_bytes(0, 4 * ITEMS as usize);
    let mut buf = header(FrameKind::PublishBatch, u32::try_from(body.len()).unwrap());
    buf.put_slice(&body);
    let dec = FrameDecoder::new(8 << 20).with_max_batch_items(1024);
    let (result, largest, total) = measure(|| dec.decode(&mut buf));
    assert_eq!(
        result,
        Err(DecodeError::TooManyItems {
            frame: "publish_batch",
            count: ITEMS,
            max: 1024
        })
    );
    assert!(
        largest < 256 && total < 1024,
        "largest {largest}, total {total}"
    );

    // 5. A blob length of ~4 GiB inside a small frame: rejected, no allocation for it.
    let mut buf = header(FrameKind::Publish, 16);
    buf.put_slice(&[
        0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0xff, 0xff, 0xff, 0xff,
    ]);
    let (result, largest, _) = measure(|| FrameDecoder::new(u32::MAX).decode(&mut buf));
    assert!(matches!(result, Err(DecodeError::Malformed { .. })));
    assert!(largest < 256, "largest {largest}");
}
