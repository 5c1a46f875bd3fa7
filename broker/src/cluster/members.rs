//! The member list: its text format and [`MemberSet`], a parsed, sorted list with its epoch.
//!
//! Format (the members file and the operator's members ConfigMap): one member per line,
//! `<id> <host:port>`, where `id` is the broker's id (its pod name) and `host:port` its QUIC
//! address as other brokers and clients reach it. Blank lines and text after `#` are ignored.

use starling_placement::Kind;

/// One member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Broker id (`POD_NAME`).
    pub id: String,
    /// QUIC address, `host:port`.
    pub addr: String,
}

/// A member list, sorted by id, with its epoch (a hash of the sorted list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSet {
    members: Vec<Member>,
    epoch: u64,
}

/// Why a member list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembersError {
    /// A line that is not `<id> <host:port>`.
    #[error("line {line}: expected `<id> <host:port>`, got {text:?}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// An address without a usable port.
    #[error("line {line}: {addr:?} is not host:port")]
    BadAddr {
        /// 1-based line number.
        line: usize,
        /// The address.
        addr: String,
    },
    /// The same id twice.
    #[error("member {0:?} is listed twice")]
    Duplicate(String),
    /// No members at all.
    #[error("the member list is empty")]
    Empty,
}

impl MemberSet {
    /// Parses the text format.
    pub fn parse(text: &str) -> Result<MemberSet, MembersError> {
        let mut members = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(id), Some(addr), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(MembersError::Malformed {
                    line: i + 1,
                    text: raw.to_string(),
                });
            };
            let port_ok = addr.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if !port_ok {
                return Err(MembersError::BadAddr {
                    line: i + 1,
                    addr: addr.to_string(),
                });
            }
            members.push(Member {
                id: id.to_string(),
                addr: addr.to_string(),
            });
        }
        MemberSet::new(members)
    }

    /// A set of `members` (any order).
    pub fn new(mut members: Vec<Member>) -> Result<MemberSet, MembersError> {
        if members.is_empty() {
            return Err(MembersError::Empty);
        }
        members.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(w) = members.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(MembersError::Duplicate(w[0].id.clone()));
        }
        let epoch =
            starling_placement::epoch(members.iter().map(|m| (m.id.as_str(), m.addr.as_str())));
        Ok(MemberSet { members, epoch })
    }

    /// A single-node broker: itself only, epoch 0.
    pub fn single(id: &str, addr: &str) -> MemberSet {
        MemberSet {
            members: vec![Member {
                id: id.to_string(),
                addr: addr.to_string(),
            }],
            epoch: 0,
        }
    }

    /// The members, sorted by id.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: &str) -> bool {
        self.members.iter().any(|m| m.id == id)
    }

    /// The member owning `key` of `kind`.
    pub fn owner(&self, kind: Kind, key: &[u8]) -> Option<&Member> {
        let id = starling_placement::owner(self.members.iter().map(|m| m.id.as_str()), kind, key)?;
        self.members.iter().find(|m| m.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sorts_and_hashes() {
        let a = MemberSet::parse("# members\nb-1 b-1.h:7400\n\nb-0 b-0.h:7400  # first\n");
        let b = MemberSet::parse("b-0 b-0.h:7400\nb-1 b-1.h:7400\n");
        assert_eq!(a, b);
        let a = a.ok();
        let ids: Vec<&str> = a
            .iter()
            .flat_map(|s| s.members())
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(ids, ["b-0", "b-1"]);
        assert_ne!(a.map(|s| s.epoch()), Some(0));
    }

    #[test]
    fn bad_lists_are_refused_with_the_line() {
        assert_eq!(
            MemberSet::parse("a"),
            Err(MembersError::Malformed {
                line: 1,
                text: "a".into()
            })
        );
        assert_eq!(
            MemberSet::parse("a h:1\nb nope"),
            Err(MembersError::BadAddr {
                line: 2,
                addr: "nope".into()
            })
        );
        assert!(matches!(
            MemberSet::parse("a h:0"),
            Err(MembersError::BadAddr { .. })
        ));
        assert_eq!(
            MemberSet::parse("a h:1\na h:2"),
            Err(MembersError::Duplicate("a".into()))
        );
        assert_eq!(MemberSet::parse("# nobody\n"), Err(MembersError::Empty));
        assert!(matches!(
            MemberSet::parse("a h:1 extra"),
            Err(MembersError::Malformed { .. })
        ));
    }

    #[test]
    fn owner_is_the_shared_placement() {
        let set = MemberSet::parse("x h:1\ny h:2\nz h:3").ok();
        for key in ["a", "b", "c", "orders"] {
            let expected = starling_placement::owner(["x", "y", "z"], Kind::Topic, key.as_bytes());
            assert_eq!(
                set.as_ref()
                    .and_then(|s| s.owner(Kind::Topic, key.as_bytes()))
                    .map(|m| m.id.as_str()),
                expected
            );
        }
    }

    #[test]
    fn address_changes_change_the_epoch() {
        let a = MemberSet::parse("x h:1").map(|s| s.epoch());
        let b = MemberSet::parse("x h:2").map(|s| s.epoch());
        assert_ne!(a, b);
    }

    mod props {
        //! The member list is read from a file or a ConfigMap anyone with write access to it can
        //! edit: the property-test counterpart of the `member_list` fuzz target
        //! (`broker/fuzz`), run in `make test`.
        use proptest::prelude::*;

        use super::super::MemberSet;

        /// Text made of member-list-like lines: ids, addresses, comments, blanks and junk.
        fn listish() -> impl Strategy<Value = String> {
            let line = prop_oneof![
                ("[a-z0-9-]{1,6}", "[a-z0-9.]{1,6}", 0u32..70_000)
                    .prop_map(|(id, host, port)| format!("{id} {host}:{port}")),
                "#[ -~]{0,10}",
                Just(String::new()),
                "[ -~\\t]{0,16}",
            ];
            prop::collection::vec(line, 0..8).prop_map(|lines| lines.join("\n"))
        }

        proptest! {
            #[test]
            fn accepted_lists_are_sorted_unique_and_order_free(text in listish()) {
                if let Ok(set) = MemberSet::parse(&text) {
                    let members = set.members();
                    prop_assert!(!members.is_empty());
                    prop_assert!(members.windows(2).all(|w| w[0].id < w[1].id));
                    let reversed: String = members
                        .iter()
                        .rev()
                        .map(|m| format!("{} {}\n", m.id, m.addr))
                        .collect();
                    let again = MemberSet::parse(&reversed);
                    prop_assert_eq!(again.as_ref().map(MemberSet::epoch), Ok(set.epoch()));
                    prop_assert_eq!(again, Ok(set));
                }
            }

            #[test]
            fn arbitrary_text_never_panics(text in "\\PC{0,120}") {
                let _ = MemberSet::parse(&text);
            }
        }
    }
}
