//! Wire compatibility with protocol version 2, as released.
//!
//! `proto/vectors/v2/frames.json` is a frozen copy of the generated conformance vectors
//! (`proto/vectors/frames.json`, see `tests/vectors_json.rs`) taken when version 2 was the
//! released protocol. It is never regenerated. This test holds the wire rule of
//! `docs/releases.md`: a frame a released version-2 peer sends must still decode to the same
//! fields and encode back to the same bytes.
//!
//! - Every frozen valid case decodes with the current decoder, consumes exactly its bytes and
//!   encodes back to them; and the current generated file (which `vectors_json` checks against
//!   the current encoder and decoder) lists the same bytes with the same type and fields.
//! - Every frozen invalid case is still refused with the same wire error code, except an
//!   unknown frame type, which a later version may define (a v2 peer never sends it).
//!
//! Retiring a frame under the deprecation policy is the only reason to edit the frozen file,
//! and the edit (removing the retired frame's cases) is named in `CHANGELOG.md`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test crate

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use starling_proto::{DecodeError, FrameDecoder};

fn vectors(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("vectors")
        .join(rel)
}

/// One case line of a generated vectors file.
struct Case {
    name: String,
    hex: String,
    /// Valid cases: the text from `"type":` on (type and fields). Invalid: the error object.
    rest: String,
    /// Invalid cases: their decoder limit.
    limit: Option<u32>,
    /// Invalid cases: the wire error code.
    code: Option<u16>,
}

/// The string value of `key` in a one-line JSON object (the generator never escapes the
/// names and hex strings this reads).
fn str_value<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\": \"");
    let start = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + pat.len();
    let len = line[start..].find('"').unwrap();
    &line[start..start + len]
}

fn num_value(line: &str, key: &str) -> u64 {
    let pat = format!("\"{key}\": ");
    let start = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + pat.len();
    let digits: String = line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The file's (max_frame_bytes, valid cases, invalid cases). The generator writes one case
/// per line, valid ones (with `"fields"`) before invalid ones (with `"error"`).
fn load(path: &Path) -> (u32, Vec<Case>, Vec<Case>) {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut limit = None;
    let (mut valid, mut invalid) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let line = line.trim().trim_end_matches(',');
        if line.starts_with("\"max_frame_bytes\"") {
            limit = Some(u32::try_from(num_value(line, "max_frame_bytes")).unwrap());
        }
        if line.starts_with("\"protocol_version\"") {
            assert_eq!(num_value(line, "protocol_version"), 2, "{}", path.display());
        }
        if !line.starts_with("{\"name\"") {
            continue;
        }
        let name = str_value(line, "name").to_owned();
        let hex = str_value(line, "hex").to_owned();
        if let Some(at) = line.find("\"type\": ") {
            assert!(line.contains("\"fields\": "), "{line}");
            let rest = line[at..].to_owned();
            valid.push(Case {
                name,
                hex,
                rest,
                limit: None,
                code: None,
            });
        } else {
            let at = line.find("\"error\": ").unwrap_or_else(|| panic!("{line}"));
            let rest = line[at..].to_owned();
            let limit = Some(u32::try_from(num_value(line, "max_frame_bytes")).unwrap());
            let code = Some(u16::try_from(num_value(&rest, "code")).unwrap());
            invalid.push(Case {
                name,
                hex,
                rest,
                limit,
                code,
            });
        }
    }
    (limit.expect("max_frame_bytes"), valid, invalid)
}

fn unhex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "{hex}");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn frozen_v2_valid_frames_decode_and_encode_identically() {
    let (limit, frozen, _) = load(&vectors("v2/frames.json"));
    let (_, current, _) = load(&vectors("frames.json"));
    assert!(
        frozen.len() >= 60,
        "the frozen file lost its cases: {}",
        frozen.len()
    );
    let now: HashMap<&str, &str> = current
        .iter()
        .map(|c| (c.hex.as_str(), c.rest.as_str()))
        .collect();
    let mut failures = Vec::new();
    for case in &frozen {
        let wire = unhex(&case.hex);
        let mut buf = BytesMut::from(&wire[..]);
        let frame = match FrameDecoder::new(limit).decode(&mut buf) {
            Ok(Some(frame)) => frame,
            other => {
                failures.push(format!("{}: no longer decodes: {other:?}", case.name));
                continue;
            }
        };
        if !buf.is_empty() {
            failures.push(format!(
                "{}: {} bytes left after the frame",
                case.name,
                buf.len()
            ));
        }
        let mut out = BytesMut::new();
        frame.encode(&mut out);
        if out[..] != wire[..] {
            failures.push(format!("{}: encodes to {} now", case.name, hex(&out)));
        }
        match now.get(case.hex.as_str()) {
            None => failures.push(format!(
                "{}: the generated vectors no longer list this released frame",
                case.name
            )),
            Some(rest) if *rest != case.rest => failures.push(format!(
                "{}: decodes to different fields now:\n  released {}\n  current  {rest}",
                case.name, case.rest
            )),
            Some(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} incompatible frames:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn frozen_v2_invalid_frames_are_still_refused_with_the_same_code() {
    let (_, _, frozen) = load(&vectors("v2/frames.json"));
    assert!(
        frozen.len() >= 1600,
        "the frozen file lost its cases: {}",
        frozen.len()
    );
    let mut failures = Vec::new();
    for case in &frozen {
        let (limit, code) = (case.limit.unwrap(), case.code.unwrap());
        let unknown_type = case.rest.contains("\"kind\": \"unknown_frame_type\"");
        let mut buf = BytesMut::from(&unhex(&case.hex)[..]);
        let result: Result<_, DecodeError> = FrameDecoder::new(limit).decode(&mut buf);
        match result {
            Err(e) if e.code().as_u16() == code => {}
            Err(e) => failures.push(format!(
                "{}: now {e} (code {})",
                case.name,
                e.code().as_u16()
            )),
            Ok(_) if unknown_type => {}
            Ok(frame) => failures.push(format!("{}: accepted now as {frame:?}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} changed refusals:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
