//! The queue groups' budgets (`max_groups_per_subject`, `max_group_members`): how many groups
//! each subject (a topic, or a wildcard pattern) has on this broker and how many members each
//! group has. A group subscription takes a [`Membership`] before it is registered and gives
//! it back when dropped; the group is forgotten with its last member. Which member gets a batch
//! is the topic task's business (`starling_pubsub::group`).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Groups by subject, members by group name.
type Table = HashMap<Arc<str>, HashMap<Arc<str>, usize>>;

/// The budgets and the counts they bound.
pub struct GroupBudget {
    max_groups: usize,
    max_members: usize,
    table: Mutex<Table>,
}

/// A group subscription was refused at a budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupLimit {
    /// The subject has `max_groups_per_subject` groups already.
    #[error(
        "`{subject}` has {max} queue groups, the most this broker allows (max_groups_per_subject); join an existing group or retry once one is gone"
    )]
    Groups {
        /// The subject.
        subject: String,
        /// The knob's value.
        max: usize,
    },
    /// The group has `max_group_members` members already.
    #[error(
        "queue group `{group}` of `{subject}` has {max} members, the most this broker allows (max_group_members)"
    )]
    Members {
        /// The subject.
        subject: String,
        /// The group.
        group: String,
        /// The knob's value.
        max: usize,
    },
}

/// One member's place in its group's count; given back when dropped.
pub struct Membership {
    budget: Arc<GroupBudget>,
    subject: Arc<str>,
    group: Arc<str>,
}

impl GroupBudget {
    /// Budgets of `max_groups` groups per subject and `max_members` members per group.
    pub fn new(max_groups: usize, max_members: usize) -> Arc<GroupBudget> {
        Arc::new(GroupBudget {
            max_groups: max_groups.max(1),
            max_members: max_members.max(1),
            table: Mutex::new(HashMap::new()),
        })
    }

    /// Counts one more member of `group` of `subject`, unless a budget refuses it.
    pub fn join(self: &Arc<Self>, subject: &str, group: &str) -> Result<Membership, GroupLimit> {
        let mut table = self.table.lock();
        let groups = table.entry(Arc::from(subject)).or_default();
        if !groups.contains_key(group) && groups.len() >= self.max_groups {
            if groups.is_empty() {
                table.remove(subject);
            }
            return Err(GroupLimit::Groups {
                subject: subject.to_string(),
                max: self.max_groups,
            });
        }
        let members = groups.entry(Arc::from(group)).or_insert(0);
        if *members >= self.max_members {
            return Err(GroupLimit::Members {
                subject: subject.to_string(),
                group: group.to_string(),
                max: self.max_members,
            });
        }
        *members += 1;
        Ok(Membership {
            budget: Arc::clone(self),
            subject: Arc::from(subject),
            group: Arc::from(group),
        })
    }

    /// Groups counted, over every subject.
    pub fn groups(&self) -> usize {
        self.table.lock().values().map(HashMap::len).sum()
    }

    /// Gives a member back; its group is forgotten with its last member.
    fn leave(&self, subject: &str, group: &str) {
        let mut table = self.table.lock();
        let Some(groups) = table.get_mut(subject) else {
            return;
        };
        if let Some(members) = groups.get_mut(group) {
            *members = members.saturating_sub(1);
            if *members == 0 {
                groups.remove(group);
            }
        }
        if groups.is_empty() {
            table.remove(subject);
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.budget.leave(&self.subject, &self.group);
    }
}

#[cfg(test)]
mod tests {
    use super::{GroupBudget, GroupLimit};

    #[test]
    fn groups_and_members_are_bounded_and_given_back() {
        let budget = GroupBudget::new(2, 2);
        let a1 = budget.join("t", "a").expect("first group");
        let a2 = budget.join("t", "a").expect("second member");
        assert!(matches!(
            budget.join("t", "a"),
            Err(GroupLimit::Members { max: 2, .. })
        ));
        let b = budget.join("t", "b").expect("second group");
        assert!(matches!(
            budget.join("t", "c"),
            Err(GroupLimit::Groups { max: 2, .. })
        ));
        // Another subject has budgets of its own.
        let other = budget.join("u", "c").expect("another subject");
        assert_eq!(budget.groups(), 3);
        drop(a1);
        assert_eq!(budget.groups(), 3, "a group with a member left stays");
        drop(a2);
        assert_eq!(budget.groups(), 2, "the last member ends the group");
        drop(b);
        drop(other);
        assert_eq!(budget.groups(), 0);
        budget.join("t", "c").expect("room again");
    }
}
