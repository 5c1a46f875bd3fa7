//! Sequencing of a tier change, so no broker is restarted while it is the only holder of cache
//! keys and subscriptions. Pure.
//!
//! A tier change moves both the broker count and the broker config (queue and lane sizing,
//! resources). Applied at once, the StatefulSet would restart the existing brokers for the new
//! config while the added ones are not members yet, so a restarting broker would have no
//! successor to hand its keys to. Instead:
//!
//! - **Growing** (the new tier has more brokers): first add the brokers with the *old* tier's
//!   config (no restart), wait until they are members and the hand-off grace has passed, then
//!   roll the new config one broker at a time; each one drains to its successors.
//! - **Shrinking** (fewer brokers): first roll the new config at the *old* broker count, then,
//!   once every broker runs it, lower the count (members first, then the StatefulSet after the
//!   hand-off grace, see [`crate::members`]).
//!
//! While the StatefulSet rolls to the target config, the broker count is never lowered (the
//! second half of the shrinking order, and any spec whose new config is still rolling).
//!
//! [`plan`] decides the step; [`stage`] applies it to a validated cluster, from what the
//! reconcile observed.

pub mod stage;

use std::time::Duration;

use starling_config::Tier;

/// How often a staged change is looked at again.
pub const STAGE_POLL: Duration = Duration::from_secs(5);

/// What is known when a reconcile starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierChangeInput {
    /// The tier to reach (`effective_tier`).
    pub target: Tier,
    /// The broker count of the target.
    pub target_replicas: i32,
    /// The tier last rendered (`status.tier`), `None` before the first apply.
    pub rendered: Option<Tier>,
    /// The current member count (`status.members`, else the StatefulSet's size), `None`
    /// before the StatefulSet exists.
    pub members: Option<i32>,
    /// The StatefulSet already carries the target's config but some brokers still run an
    /// older one or are not ready again yet (a cluster with no ready broker at all does not
    /// count: it has nothing to hand off).
    pub rolling_to_target: bool,
    /// The hand-off grace has passed since the last member change.
    pub members_settled: bool,
}

/// What to render now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Render the target as it is.
    Direct,
    /// Render the previously rendered tier's config with the target's broker count.
    GrowFirst {
        /// The tier whose config stays for now.
        keep_tier: Tier,
    },
    /// Render the target's config with the current broker count.
    RollFirst {
        /// The broker count kept for now.
        keep_replicas: i32,
    },
}

/// Plans the next step of a tier change.
pub fn plan(input: &TierChangeInput) -> Stage {
    let Some(members) = input.members else {
        return Stage::Direct;
    };
    match input.rendered {
        Some(old) if old != input.target => {
            if input.target_replicas > members
                || (input.target_replicas == members && !input.members_settled)
            {
                Stage::GrowFirst { keep_tier: old }
            } else if input.target_replicas < members {
                Stage::RollFirst {
                    keep_replicas: members,
                }
            } else {
                Stage::Direct
            }
        }
        _ if input.target_replicas < members && input.rolling_to_target => Stage::RollFirst {
            keep_replicas: members,
        },
        _ => Stage::Direct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(target: Tier, replicas: i32, rendered: Tier, members: i32) -> TierChangeInput {
        TierChangeInput {
            target,
            target_replicas: replicas,
            rendered: Some(rendered),
            members: Some(members),
            rolling_to_target: true,
            members_settled: true,
        }
    }

    #[test]
    fn growing_adds_brokers_with_the_old_config_first() {
        // small (1) → medium (3): keep small's config until three members have settled.
        let mut i = input(Tier::Medium, 3, Tier::Small, 1);
        assert_eq!(
            plan(&i),
            Stage::GrowFirst {
                keep_tier: Tier::Small
            }
        );
        i.members = Some(3);
        i.members_settled = false;
        assert_eq!(
            plan(&i),
            Stage::GrowFirst {
                keep_tier: Tier::Small
            }
        );
        i.members_settled = true;
        assert_eq!(plan(&i), Stage::Direct, "then the new config rolls");
    }

    #[test]
    fn shrinking_rolls_the_new_config_at_the_old_count_first() {
        // medium (3) → small (1): roll small's config on three brokers, then shrink.
        let i = input(Tier::Small, 1, Tier::Medium, 3);
        assert_eq!(plan(&i), Stage::RollFirst { keep_replicas: 3 });
        let mut i = input(Tier::Small, 1, Tier::Small, 3);
        assert_eq!(
            plan(&i),
            Stage::RollFirst { keep_replicas: 3 },
            "still rolling"
        );
        i.rolling_to_target = false;
        assert_eq!(plan(&i), Stage::Direct, "rolled: now the count drops");
    }

    #[test]
    fn same_count_changes_and_first_creation_are_direct() {
        assert_eq!(plan(&input(Tier::Large, 3, Tier::Medium, 3)), Stage::Direct);
        let mut i = input(Tier::Medium, 3, Tier::Small, 1);
        i.members = None;
        assert_eq!(plan(&i), Stage::Direct, "nothing exists yet");
        i.members = Some(1);
        i.rendered = None;
        assert_eq!(plan(&i), Stage::Direct, "no tier rendered before");
        // A plain scale-up or a settled scale-down without a tier change.
        assert_eq!(plan(&input(Tier::Small, 3, Tier::Small, 1)), Stage::Direct);
        let mut i = input(Tier::Small, 1, Tier::Small, 3);
        i.rolling_to_target = false;
        assert_eq!(plan(&i), Stage::Direct);
    }
}
