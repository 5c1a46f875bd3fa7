//! Log transfer streams (peer connections only): `LogRead` answered with one `LogChunk` page of
//! a durable topic's log as this broker holds it, and `LogClaim` (a member that holds a log of
//! a topic owned here) answered with `LogClaimed` once the topic has copied what it lacked.
//! See `durable::transfer` and `cluster::log_peers`.

use std::sync::Arc;

use bytes::Bytes;
use starling_proto::{
    ErrorCode, Frame, LogChunk, LogClaim, LogClaimed, LogRead, Member, write_frame,
};

use crate::cluster::Role;
use crate::durable::transfer::{self, Page};
use crate::metrics::Metrics;
use crate::pubsub::topic::Topics;
use crate::server::link::Link;
use crate::server::reply;

/// What log transfer requests use.
pub struct Handles {
    /// Metrics (the served-records counter, error frames).
    pub metrics: Arc<Metrics>,
    /// The topics, whose tasks hold their logs.
    pub topics: Arc<Topics>,
    /// Largest page of records sent (`max_frame_bytes`).
    pub max_page_bytes: u32,
}

/// Answers one `LogRead` or `LogClaim` on `send`; refused on a connection that is not a peer's.
pub async fn serve_log_request(
    h: &Handles,
    link: &Link,
    frame: Frame,
    send: &mut quinn::SendStream,
) -> std::io::Result<()> {
    let request_id = reply::request_id(&frame);
    if link.role != Role::Peer {
        let msg = "log transfer is between cluster members (peer connections) only";
        reply::error(send, &h.metrics, request_id, ErrorCode::Forbidden, msg).await;
        return Ok(());
    }
    let answer = match frame {
        Frame::LogRead(read) => read_log(h, read).await,
        Frame::LogClaim(claim) => take_claim(h, claim).await,
        other => {
            let (code, msg) = reply::unexpected(&other, "log transfer");
            Err((code, msg))
        }
    };
    match answer {
        Ok(frame) => write_frame(send, &frame).await,
        Err((code, msg)) => {
            reply::error(send, &h.metrics, request_id, code, msg).await;
            Ok(())
        }
    }
}

async fn read_log(h: &Handles, read: LogRead) -> Result<Frame, (ErrorCode, String)> {
    let (view, owner) = h.topics.log_view(&read.topic).await;
    let Some(view) = view else {
        // No log of the topic here: an empty page, not an error (the asker asks everyone).
        return Ok(Frame::LogChunk(LogChunk {
            request_id: read.request_id,
            next: None,
            more: false,
            owner,
            records: Bytes::new(),
        }));
    };
    let max = read.max_bytes.min(h.max_page_bytes).max(1) as usize;
    let from = read.from;
    let paged = tokio::task::spawn_blocking(move || {
        let page = transfer::read_page(&view, from, max);
        (page, view.next_position())
    })
    .await;
    match paged {
        Ok((
            Ok(Page {
                records,
                count,
                more,
            }),
            next,
        )) => {
            h.metrics.storage.handoff_served_records.inc_by(count);
            Ok(Frame::LogChunk(LogChunk {
                request_id: read.request_id,
                next,
                more,
                owner,
                records: Bytes::from(records),
            }))
        }
        Ok((Err(e), _)) => {
            h.metrics.storage.errors.inc();
            Err((
                ErrorCode::Internal,
                format!("reading the log of `{}`: {e}", read.topic),
            ))
        }
        Err(e) => Err((
            ErrorCode::Internal,
            format!("reading the log of `{}`: {e}", read.topic),
        )),
    }
}

async fn take_claim(h: &Handles, claim: LogClaim) -> Result<Frame, (ErrorCode, String)> {
    let from = Member {
        id: claim.from_id,
        addr: claim.from_addr,
    };
    match h.topics.claim(&claim.topic, from).await {
        Ok(records) => Ok(Frame::LogClaimed(LogClaimed {
            request_id: claim.request_id,
            records,
        })),
        Err(why) => Err((ErrorCode::Unavailable, why)),
    }
}
